//! History charts, drawn on the server as inline SVG (no script needed): processed and failed
//! jobs per step as two lines, gaps where no sample was recorded, at most [`MAX_POINTS`]
//! points (steps are averaged in groups beyond that). Also the empty live chart the script
//! fills.

use crate::admin::history::Rate;
use maud::{html, Markup};

/// Points drawn per line at most.
pub(crate) const MAX_POINTS: usize = 240;
/// The drawing's coordinate box.
const W: f64 = 600.0;
const H: f64 = 100.0;

/// Averages `rates` in groups so there are at most [`MAX_POINTS`]; a group with no value is a
/// gap. Returns the points and how many steps each stands for.
pub(crate) fn downsample(rates: &[Option<Rate>]) -> (Vec<Option<Rate>>, usize) {
    let group = rates.len().div_ceil(MAX_POINTS).max(1);
    let points = rates
        .chunks(group)
        .map(|c| {
            let known: Vec<&Rate> = c.iter().flatten().collect();
            if known.is_empty() {
                return None;
            }
            let n = known.len() as f64;
            Some(Rate {
                processed: known.iter().map(|r| r.processed).sum::<f64>() / n,
                failed: known.iter().map(|r| r.failed).sum::<f64>() / n,
            })
        })
        .collect();
    (points, group)
}

/// The chart of `points` (already downsampled), `unit` naming the y axis (`jobs/min`),
/// `from` and `to` labelling the x axis.
pub(crate) fn chart(points: &[Option<Rate>], unit: &str, from: &str, to: &str) -> Markup {
    let max = points
        .iter()
        .flatten()
        .flat_map(|r| [r.processed, r.failed])
        .fold(0.0_f64, f64::max);
    let top = nice(max);
    let n = points.len().max(2);
    let x = |i: usize| i as f64 * W / (n - 1) as f64;
    let y = |v: f64| H - (v / top) * (H - 4.0) - 2.0;
    let lines = |pick: fn(&Rate) -> f64| -> Vec<String> {
        let mut segs = Vec::new();
        let mut cur = String::new();
        for (i, p) in points.iter().enumerate() {
            match p {
                Some(r) => {
                    cur.push_str(&format!("{:.1},{:.1} ", x(i), y(pick(r))));
                }
                None if !cur.is_empty() => segs.push(std::mem::take(&mut cur)),
                None => {}
            }
        }
        if !cur.is_empty() {
            segs.push(cur);
        }
        // A lone point draws nothing as a polyline: give it a width.
        segs.into_iter()
            .map(|s| {
                if s.trim().contains(' ') {
                    s
                } else {
                    let (px, py) = s.trim().split_once(',').unwrap_or(("0", "0"));
                    let px: f64 = px.parse().unwrap_or(0.0);
                    format!("{:.1},{py} {:.1},{py}", (px - 1.0).max(0.0), px + 1.0)
                }
            })
            .collect()
    };
    let processed = lines(|r| r.processed);
    let failed = lines(|r| r.failed);
    let total_p: f64 = points.iter().flatten().map(|r| r.processed).sum();
    html! {
        div.chart {
            div.legend {
                span.p { "— processed" } " · " span.f { "— failed" }
                " · " (unit) ", scale 0–" (fmt(top))
                @if total_p == 0.0 && points.iter().all(Option::is_none) {
                    " · no samples recorded in this range yet"
                }
            }
            svg viewBox="0 0 600 100" preserveAspectRatio="none" role="img"
                aria-label={ "processed and failed " (unit) } {
                @for i in 1..4 {
                    line.grid x1="0" x2="600" y1=(i * 25) y2=(i * 25) {}
                }
                @for pts in &processed { polyline.p points=(pts) {} }
                @for pts in &failed { polyline.f points=(pts) {} }
            }
            div.axis { span { (from) } span { (to) } }
        }
    }
}

/// The live chart (`#live-chart`), filled by the script.
pub(crate) fn live_chart() -> Markup {
    html! {
        div.chart {
            div.legend {
                span.p { "— processed" } " · " span.f { "— failed" }
                " · jobs/s, live, peak " span data-live-peak { "0" }
            }
            svg #live-chart viewBox="0 0 600 100" preserveAspectRatio="none" role="img"
                aria-label="processed and failed jobs per second, live" {
                @for i in 1..4 {
                    line.grid x1="0" x2="600" y1=(i * 25) y2=(i * 25) {}
                }
                polyline.p points="" {}
                polyline.f points="" {}
            }
            div.axis { span { "3 minutes ago" } span { "now" } }
        }
    }
}

/// A round upper bound for the y axis (1, 2 or 5 times a power of ten).
fn nice(max: f64) -> f64 {
    if max <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if max <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt(v: f64) -> String {
    if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds() {
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(nice(3.0), 5.0);
        assert_eq!(nice(11.0), 20.0);
        assert_eq!(nice(700.0), 1000.0);
    }

    #[test]
    fn downsampling_averages_known_values_and_keeps_gaps() {
        let r = |p: f64| {
            Some(Rate {
                processed: p,
                failed: 0.0,
            })
        };
        let mut v = vec![None; MAX_POINTS * 2];
        v[0] = r(2.0);
        v[1] = r(4.0);
        let (pts, group) = downsample(&v);
        assert_eq!(group, 2);
        assert_eq!(pts.len(), MAX_POINTS);
        assert_eq!(pts[0].map(|p| p.processed), Some(3.0));
        assert!(pts[1].is_none());
    }
}
