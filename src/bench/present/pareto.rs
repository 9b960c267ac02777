//! The trade-off a serving setting makes between its users and its hardware, as InferenceMAX and
//! the serving papers draw it: each run a point, the speed one user sees (x) against the output
//! throughput per GPU (y), and the frontier of the runs no other run beats on both. Across a
//! sweep, the rates trade one for the other; across settings or servers, a point below the
//! frontier is beaten outright.
//!
//! - Per user: `1000 / TPOT p50` tokens per second, the decode speed of the median request
//!   (InferenceMAX's "interactivity", tok/s/user). Time to the first token is not in it.
//! - Per GPU: the run's output throughput (completed requests' tokens over the run) divided by the
//!   GPUs that served it: 1 for the engine here; for a server, what the run record says
//!   (`run_config.gpus`, from `--gpus`), else 1 and the axis says "per target".
//!
//! Pure: [`Chart::draw`] lays the points out in a view box; the HTML report writes it as SVG
//! ([`Chart::svg`]) and the page draws the same geometry.

use std::fmt::Write;

use crate::bench::base::lang::Lang;
use crate::bench::base::markup::escape;
use crate::bench::base::stats::nice_step;
use crate::bench::result::BenchResult;

/// One run on the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct ParetoPoint {
    pub label: String,
    /// Tokens per second the median request's user sees while it decodes: 1000 / TPOT p50.
    pub per_user_tok_s: f64,
    /// Output tokens per second per GPU.
    pub per_gpu_tok_s: f64,
}

impl ParetoPoint {
    /// The run's point; `None` when it has no TPOT (every output one token) or no throughput.
    pub fn of(label: String, r: &BenchResult) -> Option<ParetoPoint> {
        let tpot = r.metrics.tpot_ms.p50;
        let gpus = r.config.gpus.unwrap_or(1).max(1) as f64;
        let point =
            ParetoPoint { label, per_user_tok_s: 1000.0 / tpot, per_gpu_tok_s: r.metrics.output_throughput / gpus };
        (tpot > 0.0 && point.per_user_tok_s.is_finite() && point.per_gpu_tok_s.is_finite() && point.per_gpu_tok_s > 0.0)
            .then_some(point)
    }
}

/// Whether every one of `results` says how many GPUs served it (the engine: one), so the y axis
/// can read "per GPU"; else it reads "per target".
pub fn counts_gpus<'a>(results: impl IntoIterator<Item = &'a BenchResult>) -> bool {
    results.into_iter().all(|r| r.config.gpus.is_some() || !r.config.is_server())
}

/// The points on the frontier, by per-user speed from slow to fast: those that no other point
/// matches or beats on both axes while beating on one (ties both kept).
pub fn frontier(points: &[ParetoPoint]) -> Vec<usize> {
    let beats = |p: &ParetoPoint, q: &ParetoPoint| {
        p.per_user_tok_s >= q.per_user_tok_s
            && p.per_gpu_tok_s >= q.per_gpu_tok_s
            && (p.per_user_tok_s > q.per_user_tok_s || p.per_gpu_tok_s > q.per_gpu_tok_s)
    };
    let mut on: Vec<usize> = (0..points.len()).filter(|&i| !points.iter().any(|p| beats(p, &points[i]))).collect();
    on.sort_by(|&i, &j| points[i].per_user_tok_s.total_cmp(&points[j].per_user_tok_s));
    on
}

pub const WIDTH: f64 = 520.0;
pub const HEIGHT: f64 = 260.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// A point placed in the view box.
#[derive(Clone, Debug, PartialEq)]
pub struct Dot {
    pub x: f64,
    pub y: f64,
    /// Shown beside the dot for frontier points only (others have the tooltip): the frontier's
    /// labels alternate above and below their dots, so neighbours do not overprint.
    pub label: Option<String>,
    /// Where the label's baseline sits, in view-box units below the dot (negative: above).
    pub label_dy: f64,
    pub on_frontier: bool,
    /// "label: 41.2 tok/s per user, 530 tok/s per GPU".
    pub title: String,
}

/// A tick: its place along the axis in view-box units, and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub at: f64,
    pub text: String,
}

/// The chart's geometry in a `WIDTH` × `HEIGHT` view box, axes from 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    pub dots: Vec<Dot>,
    /// SVG path data joining the frontier's points.
    pub frontier: String,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    pub x_label: String,
    pub y_label: String,
}

/// The axis names in `lang`; `per_gpu`: whether the runs say their GPUs.
fn axis_labels(lang: Lang, per_gpu: bool) -> (&'static str, &'static str) {
    match (lang, per_gpu) {
        (Lang::En, true) => ("tok/s per user (1000 / TPOT p50)", "output tok/s per GPU"),
        (Lang::En, false) => ("tok/s per user (1000 / TPOT p50)", "output tok/s per target"),
        (Lang::Zh, true) => ("每用户 tok/s（1000 / TPOT p50）", "每 GPU 输出 tok/s"),
        (Lang::Zh, false) => ("每用户 tok/s（1000 / TPOT p50）", "每目标输出 tok/s"),
    }
}

/// "0", "12.5", "1.2k".
pub fn tick_text(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else if x >= 10.0 || x == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

impl Chart {
    pub fn draw(points: &[ParetoPoint], per_gpu: bool, lang: Lang) -> Chart {
        let (x_label, y_label) = axis_labels(lang, per_gpu);
        let unit = match (per_gpu, lang) {
            (true, _) => "GPU",
            (false, Lang::En) => "target",
            (false, Lang::Zh) => "目标",
        };
        let x_max = points.iter().map(|p| p.per_user_tok_s).fold(0.0, f64::max).max(1e-9);
        let y_max = points.iter().map(|p| p.per_gpu_tok_s).fold(0.0, f64::max).max(1e-9);
        let (x_step, y_step) = (nice_step(x_max / 4.0), nice_step(y_max / 4.0));
        let (x_top, y_top) = ((x_max / x_step).ceil() * x_step, (y_max / y_step).ceil() * y_step);
        let x_of = |x: f64| LEFT + x / x_top * (WIDTH - LEFT - RIGHT);
        let y_of = |y: f64| TOP + (1.0 - y / y_top) * (HEIGHT - TOP - BOTTOM);
        let ticks = |step: f64, top: f64, at: &dyn Fn(f64) -> f64| -> Vec<Tick> {
            let n = (top / step).round() as usize;
            (0..=n).map(|i| Tick { at: at(i as f64 * step), text: tick_text(i as f64 * step) }).collect()
        };
        let on = frontier(points);
        let dots = points
            .iter()
            .enumerate()
            .map(|(i, p)| Dot {
                x: x_of(p.per_user_tok_s),
                y: y_of(p.per_gpu_tok_s),
                label: on.contains(&i).then(|| p.label.clone()),
                label_dy: match on.iter().position(|&j| j == i) {
                    Some(k) if k % 2 == 1 => 16.0,
                    _ => -8.0,
                },
                on_frontier: on.contains(&i),
                title: match lang {
                    Lang::En => format!(
                        "{}: {:.1} tok/s per user, {:.1} tok/s per {unit}",
                        p.label, p.per_user_tok_s, p.per_gpu_tok_s
                    ),
                    Lang::Zh => format!(
                        "{}：每用户 {:.1} tok/s，每个{unit} {:.1} tok/s",
                        p.label, p.per_user_tok_s, p.per_gpu_tok_s
                    ),
                },
            })
            .collect();
        let frontier = on
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let (x, y) = (x_of(points[i].per_user_tok_s), y_of(points[i].per_gpu_tok_s));
                format!("{}{x:.1} {y:.1}", if k == 0 { "M" } else { "L" })
            })
            .collect();
        Chart {
            dots,
            frontier,
            x_ticks: ticks(x_step, x_top, &x_of),
            y_ticks: ticks(y_step, y_top, &y_of),
            x_label: x_label.into(),
            y_label: y_label.into(),
        }
    }

    /// Where the x axis' ticks sit (the plot's bottom edge) and the y axis' (its left edge).
    pub fn x_axis_y() -> f64 {
        HEIGHT - BOTTOM
    }

    pub fn y_axis_x() -> f64 {
        LEFT
    }

    /// The chart as a standalone SVG element; every label escaped.
    pub fn svg(&self, aria_label: &str) -> String {
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pareto\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
             aria-label=\"{}\" font-size=\"10\">",
            escape(aria_label)
        );
        for t in &self.y_ticks {
            let _ = write!(
                out,
                "<path d=\"M{LEFT} {:.1}H{:.1}\" stroke=\"#e2e8f0\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" \
                 fill=\"#64748b\">{}</text>",
                t.at,
                WIDTH - RIGHT,
                LEFT - 4.0,
                t.at + 4.0,
                escape(&t.text)
            );
        }
        for t in &self.x_ticks {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#64748b\">{}</text>",
                t.at,
                HEIGHT - BOTTOM + 14.0,
                escape(&t.text)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#334155\">{}</text>\
             <text x=\"8\" y=\"14\" fill=\"#334155\">{}</text>",
            (WIDTH + LEFT) / 2.0,
            HEIGHT - 4.0,
            escape(&self.x_label),
            escape(&self.y_label)
        );
        if !self.frontier.is_empty() {
            let _ = write!(out, "<path d=\"{}\" fill=\"none\" stroke=\"#3b82f6\" stroke-width=\"2\"/>", self.frontier);
        }
        for d in &self.dots {
            let fill = if d.on_frontier { "#3b82f6" } else { "#94a3b8" };
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{fill}\"><title>{}</title></circle>",
                d.x,
                d.y,
                escape(&d.title)
            );
            if let Some(label) = &d.label {
                let _ = write!(
                    out,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#334155\">{}</text>",
                    d.x,
                    d.y + d.label_dy,
                    escape(label)
                );
            }
        }
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(label: &str, user: f64, gpu: f64) -> ParetoPoint {
        ParetoPoint { label: label.into(), per_user_tok_s: user, per_gpu_tok_s: gpu }
    }

    #[test]
    fn the_frontier_is_the_points_nothing_beats_on_both_axes() {
        // By hand: d (10, 400) beats a (5, 300) on both; b (20, 250) and c (40, 100) and d are each
        // best somewhere; e (20, 200) loses to b on throughput at the same per-user speed; f equals b.
        let points = [
            p("a", 5.0, 300.0),
            p("b", 20.0, 250.0),
            p("c", 40.0, 100.0),
            p("d", 10.0, 400.0),
            p("e", 20.0, 200.0),
            p("f", 20.0, 250.0),
        ];
        assert_eq!(frontier(&points), vec![3, 1, 5, 2]);
        assert!(frontier(&[]).is_empty());
    }

    #[test]
    fn the_chart_places_points_on_their_axes_and_escapes_labels() {
        let points = [p("1 req/s", 50.0, 100.0), p("<b>8</b>", 25.0, 400.0)];
        let chart = Chart::draw(&points, true, Lang::En);
        // Both are on the frontier; the faster per user is further right, the higher throughput higher up.
        assert!(chart.dots.iter().all(|d| d.on_frontier));
        assert!(chart.dots[0].x > chart.dots[1].x && chart.dots[0].y > chart.dots[1].y);
        // The axes start at 0: the origin's tick sits at the plot's corner.
        assert_eq!(chart.x_ticks[0].at, Chart::y_axis_x());
        assert_eq!(chart.y_ticks[0].at, Chart::x_axis_y());
        assert!(chart.frontier.starts_with('M') && chart.frontier.contains('L'));
        let svg = chart.svg("Pareto");
        assert!(svg.contains("&lt;b&gt;8&lt;/b&gt;") && !svg.contains("<b>"), "{svg}");
        assert!(svg.contains("tok/s per GPU"));
    }
}
