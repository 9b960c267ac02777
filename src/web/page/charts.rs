//! The live charts, drawn by leptos-chartistry. Each chart is a pure function of a signal of
//! points: the run pushes a new [`ChartData`] at most once per animation frame, and a finished
//! (or recalled) run's data comes from its `BenchResult`.

use super::i18n::{use_text, Label};
use crate::web::protocol::charts::{BatchPoint, ChartData, Point};
use leptos::prelude::*;
use leptos_chartistry::*;

const BLUE: Colour = Colour::from_rgb(0x3b, 0x82, 0xf6);
const TEAL: Colour = Colour::from_rgb(0x14, 0xb8, 0xa6);
const VIOLET: Colour = Colour::from_rgb(0x8b, 0x5c, 0xf6);
const AMBER: Colour = Colour::from_rgb(0xf5, 0x9e, 0x0b);
const ROSE: Colour = Colour::from_rgb(0xf4, 0x3f, 0x5e);

const HEIGHT: f64 = 220.0;

/// The card around a chart: title, the x axis in words, the point count for tests.
#[component]
fn ChartCard(
    title: Label,
    x_axis: Label,
    testid: &'static str,
    /// Points drawn (for the placeholder and `data-points`).
    count: Signal<usize>,
    children: Children,
) -> impl IntoView {
    let t = use_text();
    view! {
        <figure class="chart" data-testid=testid data-points=move || count.get().to_string()>
            <figcaption>
                <span class="chart-title">{move || title(t())}</span>
                <span class="chart-axis">{move || x_axis(t())}</span>
                <Show when=move || count.get() == 0>
                    <span class="chart-empty">{move || t().no_data}</span>
                </Show>
            </figcaption>
            // No positioned wrapper: chartistry places its tooltip in page coordinates.
            <div class="chart-body">{children()}</div>
        </figure>
    }
}

fn edges() -> (Vec<EdgeLayout<f64>>, Vec<EdgeLayout<f64>>) {
    (vec![TickLabels::aligned_floats().with_min_chars(5).into_edge()], vec![TickLabels::aligned_floats().into_edge()])
}

fn inner() -> Vec<InnerLayout<f64, f64>> {
    vec![
        AxisMarker::left_edge().into_inner(),
        AxisMarker::bottom_edge().into_inner(),
        XGridLine::default().into_inner(),
        YGridLine::default().into_inner(),
    ]
}

/// One dot per point. Chartistry has no scatter series: this is a line with markers whose
/// path the stylesheet hides (`.scatter`); the markers are sized from the line's width.
#[component]
fn Scatter(points: Signal<Vec<Point>>, colour: Colour, name: &'static str) -> impl IntoView {
    let (left, bottom) = edges();
    let dots = Line::new(|p: &Point| p.y)
        .with_name(name)
        .with_colour(colour)
        .with_width(1.0)
        // Linear: the default monotone curve divides by x gaps, and at `--rate inf` every
        // request arrives at 0 s (a NaN path the browser reports as an error).
        .with_interpolation(Interpolation::Linear)
        .with_marker(Marker::from_shape(MarkerShape::Circle).with_scale(0.85));
    view! {
        <div class="scatter">
        <Chart
            aspect_ratio=AspectRatio::from_env_width(HEIGHT)
            font_height=12.0
            font_width=7.2
            left=left
            bottom=bottom
            inner=inner()
            tooltip=Tooltip::left_cursor()
            series=Series::new(|p: &Point| p.x).with_min_y(0.0).line(dots)
            data=points
        />
        </div>
    }
}

/// A line through the points, drawn with `interpolation`.
#[component]
fn LineChart(
    points: Signal<Vec<Point>>,
    colour: Colour,
    name: &'static str,
    interpolation: Interpolation,
) -> impl IntoView {
    let (left, bottom) = edges();
    let line = Line::new(|p: &Point| p.y)
        .with_name(name)
        .with_colour(colour)
        .with_width(1.5)
        .with_interpolation(interpolation);
    view! {
        <Chart
            aspect_ratio=AspectRatio::from_env_width(HEIGHT)
            font_height=12.0
            font_width=7.2
            left=left
            bottom=bottom
            inner=inner()
            tooltip=Tooltip::left_cursor()
            series=Series::new(|p: &Point| p.x).with_min_y(0.0).line(line)
            data=points
        />
    }
}

/// Running and waiting requests over time (the engine's steps, or a server's scrapes), with the
/// legend in the page's language (chartistry's series names are fixed at mount).
#[component]
fn RunningWaiting(points: Signal<Vec<BatchPoint>>, interpolation: Interpolation) -> impl IntoView {
    let t = use_text();
    let (left, bottom) = edges();
    let running = Line::new(|p: &BatchPoint| p.running)
        .with_name("running")
        .with_colour(VIOLET)
        .with_interpolation(interpolation);
    let waiting =
        Line::new(|p: &BatchPoint| p.waiting).with_name("waiting").with_colour(ROSE).with_interpolation(interpolation);
    view! {
        <Chart
            aspect_ratio=AspectRatio::from_env_width(HEIGHT)
            font_height=12.0
            font_width=7.2
            left=left
            bottom=bottom
            inner=inner()
            tooltip=Tooltip::left_cursor()
            series=Series::new(|p: &BatchPoint| p.t).with_min_y(0.0).line(running).line(waiting)
            data=points
        />
        <p class="legend">
            <span class="swatch" style="background:#8b5cf6"></span>
            {move || t().running}
            <span class="swatch" style="background:#f43f5e"></span>
            {move || t().waiting}
        </p>
    }
}

/// All five charts and the request timeline, fed by `data`.
#[component]
pub fn LiveCharts(data: Signal<ChartData>) -> impl IntoView {
    let pick = move |f: fn(&ChartData) -> Vec<Point>| Signal::from(Memo::new(move |_| data.with(f)));
    let ttft = pick(|d| d.ttft.clone());
    let ttfat = pick(|d| d.ttfat.clone());
    let tpot = pick(|d| d.tpot.clone());
    let throughput = pick(|d| d.throughput.clone());
    let kv = pick(|d| d.kv.clone());
    let batch = Signal::from(Memo::new(move |_| data.with(|d| d.batch.clone())));
    let server = Signal::from(Memo::new(move |_| data.with(|d| d.server.clone())));
    let timeline = Signal::from(Memo::new(move |_| data.with(|d| d.timeline.clone())));
    let count = |points: Signal<Vec<Point>>| Signal::derive(move || points.with(Vec::len));
    let step = Interpolation::Step(Step::Horizontal);
    view! {
        <div class="charts">
            <ChartCard title=|t| t.chart_ttft x_axis=|t| t.x_arrival testid="chart-ttft" count=count(ttft)>
                <Scatter points=ttft colour=BLUE name="TTFT" />
            </ChartCard>
            <Show when=move || ttfat.with(|p: &Vec<Point>| !p.is_empty())>
                <ChartCard title=|t| t.chart_ttfat x_axis=|t| t.x_arrival testid="chart-ttfat" count=count(ttfat)>
                    <Scatter points=ttfat colour=AMBER name="TTFAT" />
                </ChartCard>
            </Show>
            <ChartCard title=|t| t.chart_tpot x_axis=|t| t.x_arrival testid="chart-tpot" count=count(tpot)>
                <Scatter points=tpot colour=TEAL name="TPOT" />
            </ChartCard>
            <ChartCard
                title=|t| t.chart_throughput
                x_axis=|t| t.x_time
                testid="chart-throughput"
                count=count(throughput)
            >
                // A bucket's rate holds until the next bucket starts.
                <LineChart points=throughput colour=BLUE name="tok/s" interpolation=step />
            </ChartCard>
            <ChartCard
                title=|t| t.chart_batch
                x_axis=|t| t.x_time
                testid="chart-batch"
                count=Signal::derive(move || batch.with(Vec::len))
            >
                // The engine's state holds from one step to the next.
                <RunningWaiting points=batch interpolation=step />
            </ChartCard>
            <Show when=move || server.with(|s: &Vec<BatchPoint>| !s.is_empty())>
                <ChartCard
                    title=|t| t.chart_server
                    x_axis=|t| t.x_time
                    testid="chart-server"
                    count=Signal::derive(move || server.with(Vec::len))
                >
                    // A scrape is an instant's value: joined by straight lines.
                    <RunningWaiting points=server interpolation=Interpolation::Linear />
                </ChartCard>
            </Show>
            <ChartCard title=|t| t.chart_kv x_axis=|t| t.x_time testid="chart-kv" count=count(kv)>
                <LineChart points=kv colour=AMBER name="KV %" interpolation=Interpolation::Linear />
            </ChartCard>
            <super::timeline::TimelineCard data=timeline />
        </div>
    }
}
