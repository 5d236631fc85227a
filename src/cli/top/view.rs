//! Drawing one `resq top` frame: a header with counters, rates and jobs by state, a
//! throughput sparkline, the queues, the flow-control limits (when any exist) and the workers.

use super::sample::TopState;
use crate::admin::WorkerState;
use crate::cli::output::{age, duration, short};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;

/// Draws the whole screen.
pub(crate) fn draw(f: &mut Frame, s: &TopState) {
    let [header, spark, body, footer] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Length(4),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let queue_rows = (s.last.queues.len() as u16).clamp(1, 12) + 3;
    // The limits section only when a limit exists.
    let limit_rows = match s.last.limits.len() as u16 {
        0 => 0,
        n => n.min(8) + 3,
    };
    let [queues, limits, workers] = Layout::vertical([
        Constraint::Length(queue_rows),
        Constraint::Length(limit_rows),
        Constraint::Min(4),
    ])
    .areas(body);
    draw_header(f, header, s);
    draw_spark(f, spark, s);
    draw_queues(f, queues, s);
    if limit_rows > 0 {
        draw_limits(f, limits, s);
    }
    draw_workers(f, workers, s);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::raw(" q").bold(),
            Span::raw(" quit   "),
            Span::raw(format!(
                "Redis time {}",
                s.last.now.format("%Y-%m-%d %H:%M:%S UTC")
            )),
        ])),
        footer,
    );
}

fn rate(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.1}/s")).unwrap_or_else(|| "…".into())
}

fn draw_header(f: &mut Frame, area: Rect, s: &TopState) {
    let i = &s.last.info;
    let lines = vec![
        Line::from(vec![
            Span::raw("processed ").dim(),
            Span::raw(i.processed.to_string()).bold(),
            Span::raw(format!(" ({})", rate(s.processed_rate))),
            Span::raw("   failed ").dim(),
            Span::raw(i.failed.to_string()).bold(),
            Span::raw(format!(" ({})", rate(s.failed_rate))),
            Span::raw("   failure list ").dim(),
            Span::raw(i.failed_entries.to_string()).bold(),
        ]),
        Line::from(vec![
            Span::raw("queues ").dim(),
            Span::raw(i.queues.to_string()).bold(),
            Span::raw("   pending ").dim(),
            Span::raw(i.pending.to_string()).bold(),
            Span::raw("   workers ").dim(),
            Span::raw(format!("{} ({} busy)", i.workers, i.working)).bold(),
            Span::raw("   delayed ").dim(),
            Span::raw(i.delayed_timestamps.to_string()).bold(),
            Span::raw("   paused ").dim(),
            if i.paused {
                Span::raw("YES").bold().reversed()
            } else {
                Span::raw("no").bold()
            },
        ]),
        jobs_line(&s.last.jobs),
    ];
    let title = format!(" resq top — {} @ {} ", i.namespace, s.url);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// `jobs 3 queued · 1 working · 40 completed`: the states that hold jobs
/// ([`crate::admin::Admin::job_counts`]: queued, scheduled and working count every job).
fn jobs_line(counts: &[(crate::jobs::State, u64)]) -> Line<'static> {
    let mut spans = vec![Span::raw("jobs ").dim()];
    let held: Vec<_> = counts.iter().filter(|(_, n)| *n > 0).collect();
    if held.is_empty() {
        spans.push(Span::raw("none"));
    }
    for (i, (state, n)) in held.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw(" · ").dim());
        }
        spans.push(Span::raw(n.to_string()).bold());
        spans.push(Span::raw(format!(" {state}")));
    }
    Line::from(spans)
}

fn draw_spark(f: &mut Frame, area: Rect, s: &TopState) {
    let data: Vec<u64> = s.history.iter().copied().collect();
    let max = data.iter().copied().max().unwrap_or(0);
    let title = format!(" throughput (jobs/s, peak {max}) ");
    f.render_widget(
        Sparkline::default()
            .block(Block::default().borders(Borders::ALL).title(title))
            .data(&data),
        area,
    );
}

fn draw_queues(f: &mut Frame, area: Rect, s: &TopState) {
    let rows = s.last.queues.iter().map(|q| {
        Row::new(vec![
            Cell::from(q.name.clone()),
            Cell::from(q.size.to_string()),
            Cell::from(
                q.pending
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::from(if q.size == 0 {
                "-".into()
            } else {
                age(q.oldest_age_s)
            }),
        ])
    });
    let widths = [
        Constraint::Fill(3),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(10),
    ];
    let header = ["QUEUE", "SIZE", "DUE", "OLDEST"];
    f.render_widget(boxed_table(rows, widths, header, " queues "), area);
}

fn draw_limits(f: &mut Frame, area: Rect, s: &TopState) {
    let rows = s.last.limits.iter().map(|r| {
        Row::new(vec![
            Cell::from(r.limit.name.clone()),
            Cell::from(r.kind_name()),
            Cell::from(r.capacity_text()),
            Cell::from(r.in_use().to_string()),
            Cell::from(r.held().to_string()),
            Cell::from(crate::cli::limits::held_age(r.oldest_held_secs())),
            Cell::from(r.state()),
            Cell::from(short(&r.scope(), 40)),
        ])
    });
    let foreign = s
        .last
        .limits
        .iter()
        .filter(|r| !r.foreign_workers.is_empty())
        .count();
    let title = if foreign > 0 {
        format!(" limits ({foreign} with Ruby/Jesque/node-resque workers that ignore them) ")
    } else {
        " limits ".to_string()
    };
    let widths = [
        Constraint::Fill(2),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(11),
        Constraint::Length(6),
        Constraint::Fill(2),
    ];
    let header = [
        "LIMIT",
        "KIND",
        "CAPACITY",
        "IN USE",
        "HELD",
        "OLDEST HELD",
        "STATE",
        "SCOPE",
    ];
    f.render_widget(boxed_table(rows, widths, header, title), area);
}

fn draw_workers(f: &mut Frame, area: Rect, s: &TopState) {
    let mut ws: Vec<_> = s.last.workers.iter().collect();
    // Busy first, longest-running first; then the rest by id.
    ws.sort_by(|a, b| {
        let key = |w: &crate::admin::WorkerInfo| {
            (
                w.state != WorkerState::Busy,
                -(w.job.as_ref().and_then(|j| j.running_for_s).unwrap_or(0.0) * 1000.0) as i64,
            )
        };
        key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
    });
    let rows = ws.iter().map(|w| {
        let (class, queue, running) = match &w.job {
            Some(j) => (
                j.class.clone().unwrap_or_else(|| "?".into()),
                j.queue.clone().unwrap_or_default(),
                age(j.running_for_s),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        let state = match w.state {
            WorkerState::Idle => "idle",
            WorkerState::Busy => "busy",
            WorkerState::Paused => "paused",
        };
        Row::new(vec![
            Cell::from(format!("{}:{}", w.host, w.pid)),
            Cell::from(w.runtime),
            Cell::from(short(&w.queues.join(","), 24)),
            Cell::from(state),
            Cell::from(short(&class, 28)),
            Cell::from(queue),
            Cell::from(running),
            Cell::from(
                w.heartbeat_age_s
                    .map(duration)
                    .unwrap_or_else(|| "none".into()),
            ),
            Cell::from(w.processed.to_string()),
        ])
    });
    let busy = s.last.info.working;
    let widths = [
        Constraint::Fill(3),
        Constraint::Length(11),
        Constraint::Fill(2),
        Constraint::Length(6),
        Constraint::Fill(2),
        Constraint::Fill(1),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(9),
    ];
    let header = [
        "WORKER",
        "RUNTIME",
        "QUEUES",
        "STATE",
        "JOB",
        "QUEUE",
        "RUNNING",
        "HEARTBEAT",
        "PROCESSED",
    ];
    let title = format!(" workers ({} busy of {}) ", busy, ws.len());
    f.render_widget(boxed_table(rows, widths, header, title), area);
}

/// A table with a bold header row in a bordered box titled `title`.
fn boxed_table<'a, const N: usize>(
    rows: impl IntoIterator<Item = Row<'a>>,
    widths: [Constraint; N],
    header: [&'a str; N],
    title: impl Into<ratatui::text::Line<'a>>,
) -> Table<'a> {
    Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::default().borders(Borders::ALL).title(title))
}
