//! `resq top`: a live terminal view of queues, workers and rates (ratatui), refreshed every
//! `--interval`; `--once` renders one frame as plain text to stdout (two readings
//! `--interval` apart, so rates are real), for pasting and for tests.
//!
//! * [`sample`] — readings and rates; [`view`] — drawing a frame.

pub(crate) mod sample;
pub(crate) mod view;

use crate::admin::Admin;
use crate::error::{Error, Result};
use clap::Args;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use sample::{Sample, TopState};
use std::time::Duration;

/// `resq top [--interval S] [--once [--width W --height H]]`.
#[derive(Args, Debug, Clone)]
pub(crate) struct TopArgs {
    /// Seconds between refreshes (with --once: between the two readings its rates come from).
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print one frame as text and exit (alias: --snapshot).
    #[arg(long, alias = "snapshot")]
    pub once: bool,
    /// Width of the --once frame.
    #[arg(long, default_value_t = 120)]
    pub width: u16,
    /// Height of the --once frame.
    #[arg(long, default_value_t = 32)]
    pub height: u16,
}

/// Runs `resq top`.
pub(crate) async fn run(admin: &Admin, url: &str, a: TopArgs) -> Result<()> {
    if !(0.05..=3600.0).contains(&a.interval) {
        return Err(Error::Config {
            var: "--interval",
            message: "must be between 0.05 and 3600 seconds".into(),
        });
    }
    if !a.once && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(Error::Config {
            var: "top",
            message: "stdout is not a terminal, so there is no screen to draw on; \
                      `resq top --once` prints one frame as text"
                .into(),
        });
    }
    let interval = Duration::from_secs_f64(a.interval);
    let mut state = TopState::new(url, Sample::take(admin).await?);
    if a.once {
        tokio::time::sleep(interval).await;
        state.update(Sample::take(admin).await?);
        println!("{}", snapshot(&state, a.width, a.height)?);
        return Ok(());
    }
    let mut term = ratatui::try_init()?;
    let result = live(admin, &mut state, interval, &mut term).await;
    ratatui::restore();
    result
}

async fn live(
    admin: &Admin,
    state: &mut TopState,
    interval: Duration,
    term: &mut ratatui::DefaultTerminal,
) -> Result<()> {
    loop {
        term.draw(|f| view::draw(f, state))?;
        let deadline = tokio::time::Instant::now() + interval;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let ev = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Event>> {
                if event::poll(left)? {
                    Ok(Some(event::read()?))
                } else {
                    Ok(None)
                }
            })
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))??;
            match ev {
                Some(Event::Key(k)) if k.kind == KeyEventKind::Press => {
                    let ctrl_c =
                        k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                        return Ok(());
                    }
                }
                Some(Event::Resize(..)) => term.draw(|f| view::draw(f, state)).map(|_| ())?,
                _ => {}
            }
        }
        match Sample::take(admin).await {
            Ok(s) => state.update(s),
            Err(e) => tracing::debug!(error = %e, "top: reading failed; keeping the last one"),
        }
    }
}

/// One frame of `state`, `width`×`height`, as text lines (trailing spaces trimmed).
pub(crate) fn snapshot(state: &TopState, width: u16, height: u16) -> Result<String> {
    let mut term = Terminal::new(TestBackend::new(width, height))?;
    term.draw(|f| view::draw(f, state))?;
    let buf = term.backend().buffer();
    let mut lines = Vec::with_capacity(height as usize);
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        lines.push(line.trim_end().to_string());
    }
    Ok(lines.join("\n"))
}
