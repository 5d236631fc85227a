//! The dashboard's Batches tab over plain HTTP (the router called in-process): the list of
//! batches newest first with their counts and bars, a batch's page with its report (a stuck
//! batch named as such, with the foreign worker) and its members page by page, the jobs
//! waiting for others with their dependencies, paging, escaping, auth and read-only mode.

use crate::support;
use crate::web_common;

use axum::http::StatusCode;
use redis::AsyncCommands;
use resq::jobs::{IfDepFailed, State, Track};
use resq::web::Auth;
use resq::workflows::{Batch, BatchId};
use resq::{Client, JobContext, JobError, Registry};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;
use support::Keys;
use web_common::{assert_escaped, get, router};

async fn client(ns: &str) -> Client {
    Client::connect(&support::url(), ns).await.unwrap()
}

/// The job ids a page links to (`job?id=<id>`), in order, each once.
fn job_links(html: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for part in html.split("job?id=").skip(1) {
        let id: String = part.chars().take(32).collect();
        if id.len() == 32 && !seen.contains(&id) {
            seen.push(id);
        }
    }
    seen
}

/// The `<tr …>` row of `html` that carries `marker`, up to its `</tr>`.
fn row<'a>(html: &'a str, marker: &str) -> &'a str {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in:\n{html}"));
    let end = html[at..].find("</tr>").map_or(html.len(), |e| at + e);
    &html[at..end]
}

/// The text of the element carrying attribute `attr` (`data-failed`) in `html`.
fn cell<'a>(html: &'a str, attr: &str) -> &'a str {
    let at = html
        .find(attr)
        .unwrap_or_else(|| panic!("no {attr} in:\n{html}"))
        + attr.len();
    let start = at + html[at..].find('>').expect("tag end") + 1;
    let end = start + html[start..].find('<').expect("text end");
    &html[start..end]
}

#[tokio::test]
async fn batches_are_listed_with_counts_and_one_shows_its_report_and_members() {
    let ns = support::namespace("web-batches");
    let c = client(&ns).await;
    let registry = Registry::new()
        .handler("Ok", |_ctx: JobContext| async { Ok(()) })
        .handler("Fail", |_ctx: JobContext| async {
            Err(JobError::msg("no <b>"))
        });
    let (ran, members) = c
        .create_batch(
            Batch::new()
                .description("thumbnails")
                .job("wb", "Ok", vec![json!(1)])
                .job("wb", "Ok", vec![json!(2)])
                .job("wb", "Fail", vec![]),
        )
        .await
        .unwrap();
    let w = support::start(support::builder(&ns, "wb").registry(registry)).await;
    for m in &members {
        let s = c.wait(m, Duration::from_secs(15)).await.unwrap().unwrap();
        assert!(s.state.is_final(), "{s:?}");
    }
    support::stop(w).await;
    // A newer batch, not run, its description hostile; a Ruby worker polls its queue.
    let (idle, idle_members) = c
        .create_batch(
            Batch::new()
                .description(web_common::SCRIPT_CLASS)
                .job("idle", "Ok", vec![json!(3)])
                .job("idle", "Ok", vec![json!(4)]),
        )
        .await
        .unwrap();
    let k = Keys::new(ns.as_str());
    let ruby = "rubybox:4242:idle";
    let _: () = support::con().await.sadd(k.workers(), ruby).await.unwrap();

    let app = router(&ns, |c| c).await;
    let list = get(&app, "/batches").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_escaped(&list.body, "/batches");
    let (at_idle, at_ran) = (
        list.body.find(idle.as_str()).unwrap(),
        list.body.find(ran.as_str()).unwrap(),
    );
    assert!(at_idle < at_ran, "not newest first");
    let r = row(&list.body, &format!("data-batch=\"{ran}\""));
    assert_eq!((cell(r, "data-total"), cell(r, "data-pending")), ("3", "0"));
    assert_eq!(
        (cell(r, "data-succeeded"), cell(r, "data-failed")),
        ("2", "1")
    );
    assert!(r.contains("badge failed"), "{r}");
    assert!(r.contains("thumbnails"), "{r}");
    // The bar: two thirds succeeded, one third failed.
    assert!(r.contains(r#"class="ok" x="0" y="0" width="66.67""#), "{r}");
    assert!(
        r.contains(r#"class="bad" x="66.67" y="0" width="33.33""#),
        "{r}"
    );
    let r = row(&list.body, &format!("data-batch=\"{idle}\""));
    assert_eq!(cell(r, "data-pending"), "2");
    assert!(r.contains("badge running"), "{r}");
    assert!(r.contains(r#"class="ok" x="0" y="0" width="0.00""#), "{r}");
    // Linked from the navigation of every page.
    let overview = get(&app, "/overview").await;
    assert!(
        overview.body.contains(r#"href="./batches">Batches</a>"#),
        "no tab"
    );

    // One batch: its counts and its members, each linked to its job's page.
    let page = get(&app, &format!("/batch?id={ran}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("None: every member has ended."),
        "{}",
        page.body
    );
    let linked: BTreeSet<String> = job_links(&page.body).into_iter().collect();
    let want: BTreeSet<String> = members.iter().map(|m| m.to_string()).collect();
    assert_eq!(linked, want);
    assert!(page.body.contains("no &lt;b&gt;"), "the failure's error");
    assert!(!page.body.contains("data-stuck"), "{}", page.body);

    // The idle batch: its foreign worker is named; once that worker takes a member, stuck.
    let page = get(&app, &format!("/batch?id={idle}")).await;
    assert_escaped(&page.body, "/batch");
    assert!(!page.body.contains("data-stuck") && page.body.contains(ruby));
    let taken: String = support::con()
        .await
        .lpop(k.queue("idle"), None)
        .await
        .unwrap();
    let gone = idle_members
        .iter()
        .find(|m| taken.contains(m.as_str()))
        .unwrap();
    let page = get(&app, &format!("/batch?id={idle}")).await;
    let stuck = row(&page.body, "data-stuck");
    assert!(
        stuck.contains("Stuck:") && stuck.contains(gone.as_str()),
        "{stuck}"
    );
    assert!(page.body.contains(ruby), "{}", page.body);
    // Had its creator stopped midway (staging), its members would be outside their queues as
    // they should: said so, not called stuck.
    let _: () = support::con()
        .await
        .hset(k.batch(idle.as_str()), "state", "staging")
        .await
        .unwrap();
    let page = get(&app, &format!("/batch?id={idle}")).await;
    assert!(page.body.contains("data-staging") && !page.body.contains("data-stuck"));

    // Unknown and malformed ids.
    let unknown = get(&app, &format!("/batch?id={}", BatchId::new())).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        get(&app, "/batch?id=nope").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        get(&app, &format!("/batch?id={ran}&cursor=x")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn a_batchs_members_page_by_cursor_and_the_list_by_offset() {
    let ns = support::namespace("web-batch-pages");
    let c = client(&ns).await;
    let mut b = Batch::new();
    for i in 0..130 {
        b = b.job("nowhere", "Ok", vec![json!(i)]);
    }
    let (big, members) = c.create_batch(b).await.unwrap();
    let app = router(&ns, |c| c).await;
    let mut seen = BTreeSet::new();
    let mut url = format!("/batch?id={big}");
    for _ in 0..20 {
        let page = get(&app, &url).await;
        assert_eq!(page.status, StatusCode::OK);
        let members_table = &page.body[page.body.find("<h2>Members</h2>").unwrap()..];
        seen.extend(job_links(members_table));
        let Some(at) = members_table.find("&amp;cursor=") else {
            break;
        };
        let next: String = members_table[at + 12..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        url = format!("/batch?id={big}&cursor={next}");
    }
    let want: BTreeSet<String> = members.iter().map(|m| m.to_string()).collect();
    assert_eq!(seen, want, "every member, page by page");
    assert!(
        url.contains("cursor="),
        "a batch of 130 takes more than one page"
    );

    // 27 more batches: two pages of 25.
    for _ in 0..27 {
        c.create_batch(Batch::new().job("nowhere", "Ok", vec![]))
            .await
            .unwrap();
    }
    let first = get(&app, "/batches").await;
    assert!(first.body.contains("page 1 of 2 (28)"), "{}", first.body);
    let second = get(&app, "/batches?offset=25").await;
    assert!(second.body.contains("page 2 of 2 (28)"));
    assert_eq!(second.body.matches("data-batch=").count(), 3);
    // The first batch made is the last listed.
    assert!(second.body.contains(big.as_str()));
    assert!(!first.body.contains(big.as_str()));
}

#[tokio::test]
async fn waiting_jobs_are_listed_with_their_dependencies_until_released() {
    let ns = support::namespace("web-waiting");
    let c = client(&ns).await;
    let dep = c
        .enqueue_class_tracked("nowhere", "Ok", &[], Track::new())
        .await
        .unwrap();
    let (bid, _) = c
        .create_batch(Batch::new().job("nowhere", "Ok", vec![]))
        .await
        .unwrap();
    let waiter = c
        .enqueue_class_tracked(
            "nowhere",
            web_common::SCRIPT_CLASS,
            &[],
            Track::new()
                .after(dep.clone())
                .if_dep_failed(IfDepFailed::Fail)
                .in_batch(&bid),
        )
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let page = get(&app, "/waiting").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_escaped(&page.body, "/waiting");
    let r = row(&page.body, &format!("data-waiting=\"{waiter}\""));
    assert!(r.contains(&format!("job?id={dep}")), "{r}");
    assert!(r.contains("badge queued"), "the dependency's state: {r}");
    assert!(r.contains("1 of 1") && r.contains("fail"), "{r}");
    assert!(r.contains(&format!("batch?id={bid}")), "{r}");
    // The tab's views carry the counts.
    let list = get(&app, "/batches").await;
    assert!(
        list.body
            .contains(r#"waiting jobs <span class="count">1</span>"#),
        "{}",
        list.body
    );

    // Its dependency is cancelled: it ends failed (its policy), and is no longer listed.
    c.cancel(&dep).await.unwrap();
    assert_eq!(
        c.status(&waiter).await.unwrap().unwrap().state,
        State::Failed
    );
    let page = get(&app, "/waiting").await;
    assert!(!page.body.contains(waiter.as_str()), "{}", page.body);
    assert!(page.body.contains("No job is waiting for others."));
}

#[tokio::test]
async fn batch_pages_need_credentials_and_work_read_only() {
    let ns = support::namespace("web-batches-auth");
    let c = client(&ns).await;
    let (bid, _) = c
        .create_batch(Batch::new().job("nowhere", "Ok", vec![]))
        .await
        .unwrap();
    let locked = router(&ns, |c| c.auth(Auth::none().with_bearer("s3cret"))).await;
    for path in ["/batches", &format!("/batch?id={bid}"), "/waiting"] {
        assert_eq!(
            get(&locked, path).await.status,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    let ro = router(&ns, |c| c.read_only(true)).await;
    for path in ["/batches", &format!("/batch?id={bid}"), "/waiting"] {
        let page = get(&ro, path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(page.body.contains("read-only"), "{path}");
        assert!(!page.body.contains("<form method=\"post\""), "{path}");
    }
}

#[tokio::test]
async fn a_batch_key_of_another_type_does_not_fail_the_list_or_its_members() {
    let ns = support::namespace("web-batches-bad");
    let c = client(&ns).await;
    let (good, members) = c
        .create_batch(
            Batch::new()
                .job("nowhere", "Ok", vec![])
                .job("nowhere", "Ok", vec![]),
        )
        .await
        .unwrap();
    let k = Keys::new(ns.as_str());
    let bad = BatchId::new();
    let _: () = redis::pipe()
        .zadd(k.batches(), bad.as_str(), i64::MAX / 2)
        .set(k.batch(bad.as_str()), "garbage")
        .set(k.job_record(members[0].as_str()), "garbage")
        .query_async(&mut support::con().await)
        .await
        .unwrap();
    let app = router(&ns, |c| c).await;
    let list = get(&app, "/batches").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    // The bad one is listed as unreadable, not left out silently.
    assert!(list.body.contains(good.as_str()) && list.body.contains(bad.as_str()));
    assert!(list.body.contains("unreadable"), "{}", list.body);
    let page = get(&app, &format!("/batch?id={good}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(members[1].as_str()), "{}", page.body);
}
