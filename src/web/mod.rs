//! `resq web`: the fleet's dashboard, without Ruby — an `axum` router serving server-rendered
//! pages over the same Redis as resque-web, Jesque and node-resque (docs/web.md).
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use resq::admin::Admin;
//! use resq::web::{self, Auth, WebConfig};
//! let admin = Admin::connect("redis://127.0.0.1:6379", "resque").await?;
//! let config = WebConfig::new(admin).auth(Auth::none().with_bearer("s3cret"));
//! // Under a service's own router: every link is relative, so any mount point works.
//! let app: axum::Router = axum::Router::new().nest("/resq", web::router(config));
//! # Ok(()) }
//! ```
//!
//! Pages, one module each: `overview` (counters and graphs, live by polling `api`),
//! `queues`, `workers`, `failed` (+ `failed_actions`), `delayed`, `recurring`,
//! `jobs`, `batches` (batches and the jobs waiting for others), `limits`, `coverage` (which
//! classes of each queue the serving binary has handlers for), `stats`.
//! Around them: `guard` (security headers, auth, methods),
//! `ctx` (relative links, parameters, CSRF-checked forms), `layout` (the page shell; maud
//! escapes every value), `graph` (SVG charts), `assets` (embedded CSS/JS), `counts`
//! (failure counts off the request path), `sources` (the seams for tracked jobs, limits and
//! per-queue pause), `server` (serve on an address with the history sampler), `auth`,
//! `error`, `state`, `pool` (each request's own Redis connection). Everything it reads or repairs goes through [`crate::admin`].
//!
//! Security: only the hosts it is configured for (loopback names, the bound address, `--host`)
//! and, for a change, only its own origin (`origin`); authentication (basic and/or bearer) on
//! every route; `POST` only for changes,
//! each form carrying a per-process random CSRF token; a read-only mode that shows no action
//! and refuses every `POST`; a CSP without inline script, no framing, `nosniff`.

pub(crate) mod api;
pub(crate) mod assets;
pub(crate) mod auth;
pub(crate) mod batches;
pub(crate) mod counts;
pub(crate) mod coverage;
pub(crate) mod ctx;
pub(crate) mod delayed;
pub(crate) mod error;
pub(crate) mod failed;
pub(crate) mod failed_actions;
pub(crate) mod graph;
pub(crate) mod guard;
pub(crate) mod jobs;
pub(crate) mod layout;
pub(crate) mod limits;
pub(crate) mod origin;
pub(crate) mod overview;
pub(crate) mod pool;
pub(crate) mod queues;
pub(crate) mod recurring;
pub(crate) mod server;
pub(crate) mod sources;
pub(crate) mod state;
pub(crate) mod stats;
pub(crate) mod workers;

pub use auth::Auth;
pub use error::WebError;
pub use server::{check_bind, serve, spawn_sampler, WebServer};
pub use sources::{
    FleetLimits, JobCounts, JobRow, JobsPage, JobsSource, LimitRow, LimitsSource, PausedQueues,
    QueuePauses, TrackedJobs,
};

use crate::admin::Admin;
use crate::client::FloatFormat;
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// Queue names a page reads at most (`<ns>:queues` may hold 200,000 names Resque never
/// removes): sizes, totals and the largest queues are then of those read, and the page says so.
pub(crate) const QUEUE_NAMES: usize = 2_000;

/// Entries (jobs, and names of queues and held sets) a Jobs page looks at at most: a page
/// that stops there says so and links to where it goes on.
pub(crate) const JOBS_BUDGET: usize = 1_000;

/// Partitions of keyed limits the Limits page reads at most (three commands each): a page that
/// stops there says so.
pub(crate) const LIMIT_PARTS: usize = 1_000;

/// Entries a filtered failure page examines at most, by default.
pub(crate) const SEARCH_BUDGET: usize = 20_000;

/// What the dashboard serves and how.
pub struct WebConfig {
    /// The namespace.
    pub admin: Admin,
    /// Show and accept no action.
    pub read_only: bool,
    /// Who may use it.
    pub auth: Auth,
    /// Tracked jobs for the Jobs page ([`TrackedJobs`] by default).
    pub jobs: Option<Arc<dyn JobsSource>>,
    /// Limits for the Limits page ([`FleetLimits`] by default).
    pub limits: Option<Arc<dyn LimitsSource>>,
    /// Per-queue pause ([`PausedQueues`] by default).
    pub pauses: Option<Arc<dyn QueuePauses>>,
    /// Float text of args re-encoded when a schedule is enqueued now.
    pub float_format: FloatFormat,
    /// Entries a filtered failure page examines at most.
    pub search_budget: usize,
    /// Host names (`name` or `name:port`) the dashboard answers to besides the loopback
    /// names (and, under [`serve`], its bound address): a request naming another `Host` is
    /// refused, which defeats DNS rebinding.
    pub hosts: Vec<String>,
    /// The handlers the Coverage page compares the namespace's classes with (none: the page
    /// says so). `resq web` from a binary built on [`crate::cli::run`] passes its registry.
    pub registry: Option<Arc<crate::Registry>>,
}

impl WebConfig {
    /// Defaults for `admin`: read-write, no authentication, [`TrackedJobs`], [`FleetLimits`],
    /// [`PausedQueues`].
    pub fn new(admin: Admin) -> Self {
        WebConfig {
            admin,
            read_only: false,
            auth: Auth::none(),
            jobs: Some(Arc::new(TrackedJobs)),
            limits: Some(Arc::new(FleetLimits)),
            pauses: Some(Arc::new(PausedQueues)),
            float_format: FloatFormat::default(),
            search_budget: SEARCH_BUDGET,
            hosts: Vec::new(),
            registry: None,
        }
    }

    /// Read-only mode.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Authentication.
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// The Jobs page's source.
    pub fn jobs(mut self, source: Arc<dyn JobsSource>) -> Self {
        self.jobs = Some(source);
        self
    }

    /// The Limits page's source.
    pub fn limits(mut self, source: Arc<dyn LimitsSource>) -> Self {
        self.limits = Some(source);
        self
    }

    /// Per-queue pause.
    pub fn pauses(mut self, source: Arc<dyn QueuePauses>) -> Self {
        self.pauses = Some(source);
        self
    }

    /// Float text for schedules enqueued now.
    pub fn float_format(mut self, f: FloatFormat) -> Self {
        self.float_format = f;
        self
    }

    /// The handlers the Coverage page compares with.
    pub fn registry(mut self, registry: crate::Registry) -> Self {
        self.registry = Some(Arc::new(registry));
        self
    }

    /// Also answer to host `name` (`ops.example.com`, or `name:port` for that port only):
    /// the name browsers use to reach the dashboard when it is not a loopback one.
    pub fn host(mut self, name: impl Into<String>) -> Self {
        self.hosts.push(name.into());
        self
    }

    /// Entries a filtered failure page examines at most.
    pub fn search_budget(mut self, n: usize) -> Self {
        self.search_budget = n;
        self
    }
}

/// The dashboard's router, to serve alone or to `nest` under a path. It does not sample
/// history in the background by itself (its live endpoint samples while someone watches);
/// run [`spawn_sampler`] beside it, or let [`serve`] do both.
pub fn router(config: WebConfig) -> Router {
    let app = Arc::new(state::App::new(config));
    Router::new()
        .route("/", get(overview::show))
        .route("/overview", get(overview::show))
        .route("/pause", post(overview::pause))
        .route("/resume", post(overview::resume))
        .route("/api/live", get(api::live))
        .route("/queues", get(queues::list))
        .route("/queue", get(queues::show))
        .route("/queue/delete", post(queues::delete))
        .route("/queue/run", post(queues::run))
        .route("/queue/clear", post(queues::clear))
        .route("/queue/remove", post(queues::remove))
        .route("/queue/pause", post(queues::pause))
        .route("/workers", get(workers::show))
        .route("/failed", get(failed::list))
        .route("/failure", get(failed::show))
        .route("/failed/retry", post(failed_actions::retry))
        .route("/failed/remove", post(failed_actions::remove))
        .route("/failed/bulk", post(failed_actions::bulk))
        .route("/failed/clear", post(failed_actions::clear))
        .route("/delayed", get(delayed::show))
        .route("/delayed/run", post(delayed::run))
        .route("/delayed/delete", post(delayed::delete))
        .route("/recurring", get(recurring::show))
        .route("/recurring/enqueue", post(recurring::enqueue))
        .route("/recurring/delete", post(recurring::delete))
        .route("/jobs", get(jobs::list))
        .route("/job", get(jobs::show))
        .route("/jobs/cancel", post(jobs::cancel_job))
        .route("/batches", get(batches::list))
        .route("/batch", get(batches::show))
        .route("/waiting", get(batches::waiting))
        .route("/limits", get(limits::show))
        .route("/coverage", get(coverage::show))
        .route("/stats", get(stats::show))
        .route("/assets/{name}", get(assets::asset))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            pool::lend,
        ))
        .layer(axum::middleware::from_fn(guard::collect_notes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::methods,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::origin,
        ))
        .layer(axum::middleware::from_fn(guard::security_headers))
        .with_state(app)
}

async fn not_found() -> WebError {
    WebError::NotFound("no such page".into())
}
