//! Drawing a figure as a PNG in memory with plotters and the embedded font: axes, round ticks,
//! shortened labels and the encoder.

use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use plotters::backend::{BitMapBackend, DrawingBackend, RGBPixel};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::element::{Circle, EmptyElement, PathElement, Rectangle, Text};
use plotters::prelude::{Cartesian2d, ChartBuilder, ChartContext};
use plotters::style::{Color, FontStyle, RGBColor, WHITE};

use super::cells::{civil_from_days, days_from_civil};
use super::figure::{BarGroup, Bin, Figure, Series};
use super::text::{short, split_instant, truncate_chars};
use super::{
    BAR_COLOR, DEJAVU_SANS, FONT_FAMILY, FormatError, GRID_COLOR, MAX_LABEL_CHARS, MAX_TITLE_CHARS,
    MILLIS_PER_DAY, PNG_HEIGHT, PNG_WIDTH, SERIES_COLORS,
};

type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;
type Canvas<'a> = DrawingArea<BitMapBackend<'a, RGBPixel>, Shift>;
type Plot<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b, RGBPixel>, Cartesian2d<TickedAxis, TickedAxis>>;

/// A linear axis whose ticks are given up front, so plotters' own tick search (which asserts
/// and loops on odd ranges) is never used.
#[derive(Debug, Clone)]
struct TickedAxis {
    pub(super) low: f64,
    pub(super) high: f64,
    pub(super) ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, (start, end): (i32, i32)) -> i32 {
        let span = self.high - self.low;
        let ratio = if span > 0.0 { (value - self.low) / span } else { 0.5 };
        let pixel = f64::from(start) + ratio * (f64::from(end) - f64::from(start));
        // Out-of-range values land off the canvas; the clamp keeps the cast meaningful.
        if pixel.is_nan() { start } else { pixel.round().clamp(-1e6, 1e6) as i32 }
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() { Vec::new() } else { self.ticks.clone() }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.low..self.high
    }
}

pub(crate) fn render_png(figure: &Figure) -> Result<Vec<u8>, FormatError> {
    register_font()?;
    let mut pixels = vec![255u8; PNG_WIDTH as usize * PNG_HEIGHT as usize * 3];
    // Plotters is third-party drawing code with internal `expect`s; the inputs are sanitised
    // (finite, bounded, non-empty ranges), and this turns any panic left into an error instead
    // of taking the request down.
    let drawn = panic::catch_unwind(AssertUnwindSafe(|| draw_figure(figure, &mut pixels)));
    match drawn {
        Ok(Ok(())) => encode_png(&pixels),
        Ok(Err(reason)) => Err(FormatError::Render { reason }),
        Err(_) => Err(FormatError::Render { reason: "the plotting library failed".to_owned() }),
    }
}

fn register_font() -> Result<(), FormatError> {
    // Plotters keeps its fonts in a process-wide table; registering once is enough.
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok()
    });
    if registered {
        Ok(())
    } else {
        Err(FormatError::Render { reason: "the embedded font could not be loaded".to_owned() })
    }
}

fn draw_figure(figure: &Figure, pixels: &mut [u8]) -> Result<(), String> {
    let backend =
        BitMapBackend::<RGBPixel>::with_buffer_and_format(pixels, (PNG_WIDTH, PNG_HEIGHT))
            .map_err(|error| error.to_string())?;
    let root = backend.into_drawing_area();
    let drawn = root.fill(&WHITE).and_then(|()| match &figure.series {
        Series::Line { points, .. } => draw_line(&root, figure, points),
        Series::Bar { bars } => draw_bars(&root, figure, bars),
        Series::GroupedBar { runs, groups } => draw_grouped_bars(&root, figure, runs, groups),
        Series::Scatter { points } => draw_scatter(&root, figure, points),
        Series::Histogram { bins } => draw_histogram(&root, figure, bins),
    });
    drawn.and_then(|()| root.present()).map_err(|error| error.to_string())
}

/// One axis of a plot: its range, where its ticks go, how they read and what it shows.
struct Axis<'f> {
    pub(super) low: f64,
    pub(super) high: f64,
    pub(super) ticks: Vec<f64>,
    pub(super) label: Box<dyn Fn(&f64) -> String + 'f>,
    pub(super) title: String,
    pub(super) grid: bool,
}

impl Axis<'_> {
    /// A numeric axis over `low..high` with about `ticks` round ticks.
    pub(super) fn numeric(low: f64, high: f64, ticks: usize, title: String) -> Axis<'static> {
        let ticks = nice_ticks(low, high, ticks);
        let format = number_format(&ticks);
        let label = Box::new(move |value: &f64| format_number(*value, format));
        Axis { low, high, ticks, label, title, grid: true }
    }
}

/// Draws the title, axes, ticks and grid, and returns the plot to draw the series in. Ticks are
/// always given explicitly: plotters' own tick search is never asked to cope with odd ranges.
fn plot_area<'a, 'b>(
    root: &'a Canvas<'b>,
    title: &str,
    x: Axis<'_>,
    y: Axis<'_>,
    y_label_area: u32,
) -> Result<Plot<'a, 'b>, DrawError> {
    let mut plot = ChartBuilder::on(root)
        .caption(short_title(title), (FONT_FAMILY, 22))
        .margin(16)
        .margin_right(40)
        .x_label_area_size(44)
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(
            TickedAxis { low: x.low, high: x.high, ticks: x.ticks },
            TickedAxis { low: y.low, high: y.high, ticks: y.ticks },
        )?;
    let mut mesh = plot.configure_mesh();
    mesh.light_line_style(WHITE)
        .bold_line_style(GRID_COLOR)
        .x_label_formatter(&*x.label)
        .y_label_formatter(&*y.label)
        .label_style((FONT_FAMILY, 13))
        .axis_desc_style((FONT_FAMILY, 15))
        .x_desc(short(&x.title))
        .y_desc(short(&y.title));
    if !x.grid {
        mesh.disable_x_mesh();
    }
    if !y.grid {
        mesh.disable_y_mesh();
    }
    mesh.draw()?;
    Ok(plot)
}

fn draw_line(root: &Canvas<'_>, figure: &Figure, points: &[(f64, f64)]) -> Result<(), DrawError> {
    let (x_min, x_max) = bounds(points.iter().map(|point| point.0));
    let (x_low, x_high) = if x_max - x_min < 1_000.0 {
        (x_min - MILLIS_PER_DAY as f64, x_max + MILLIS_PER_DAY as f64)
    } else {
        padded_range(x_min, x_max, false)
    };
    let (ticks, step) = time_ticks(x_low, x_high);
    let x = Axis {
        low: x_low,
        high: x_high,
        ticks,
        label: Box::new(move |millis: &f64| format_time_label(*millis, step)),
        title: figure.x_name.clone(),
        grid: true,
    };
    let (y_min, y_max) = bounds(points.iter().map(|point| point.1));
    let (y_low, y_high) = padded_range(y_min, y_max, false);
    let y = Axis::numeric(y_low, y_high, 8, figure.y_name.clone());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    if points.len() <= 100 {
        plot.draw_series(points.iter().map(|point| Circle::new(*point, 3, BAR_COLOR.filled())))?;
    }
    plot.draw_series(std::iter::once(PathElement::new(
        points.to_vec(),
        BAR_COLOR.stroke_width(2),
    )))?;
    Ok(())
}

fn draw_bars(root: &Canvas<'_>, figure: &Figure, bars: &[(String, f64)]) -> Result<(), DrawError> {
    let (low, high) = bounds(bars.iter().map(|bar| bar.1));
    let (x_low, x_high) = padded_range(low, high, true);
    let x = Axis::numeric(x_low, x_high, 8, figure.y_name.clone());
    let count = bars.len();
    let (y, label_area) = category_axis(bars.iter().map(|bar| bar.0.as_str()), &figure.x_name);
    let mut plot = plot_area(root, &figure.title, x, y, label_area)?;
    // About 380 pixels are left for the bars: thin gaps when there are many, at most 48 pixels
    // of bar when there are few.
    let slot_pixels = 380 / count.max(1) as u32;
    let margin = (slot_pixels * 15 / 100).max(slot_pixels.saturating_sub(48) / 2).max(1);
    plot.draw_series(bars.iter().enumerate().map(|(rank, (_, value))| {
        let slot = (count - 1 - rank) as f64;
        let mut bar = Rectangle::new([(0.0, slot - 0.5), (*value, slot + 0.5)], BAR_COLOR.filled());
        bar.set_margin(margin, margin, 0, 0);
        bar
    }))?;
    Ok(())
}

/// The category axis of a horizontal bar chart: category `rank` (0 first) sits in slot
/// `count - 1 - rank`, so the first is on top; with the width its labels need.
fn category_axis<'l>(labels: impl Iterator<Item = &'l str>, title: &str) -> (Axis<'static>, u32) {
    let labels: Vec<String> = labels.map(short_label).collect();
    let count = labels.len();
    let longest = labels.iter().map(|label| label.chars().count()).max().unwrap_or(0);
    let label_area = (longest as u32 * 7 + 48).clamp(80, 260);
    let label = move |slot: &f64| {
        let rank = (count as f64 - 1.0 - slot).round();
        let exact = (count as f64 - 1.0 - slot - rank).abs() < 1e-6 && rank >= 0.0;
        let found = if exact { labels.get(rank as usize) } else { None };
        found.cloned().unwrap_or_default()
    };
    let axis = Axis {
        low: -0.5,
        high: count as f64 - 0.5,
        ticks: (0..count).map(|slot| slot as f64).collect(),
        label: Box::new(label),
        title: title.to_owned(),
        grid: false,
    };
    (axis, label_area)
}

/// Horizontal bars grouped by category, each run's bar beside the others' in its colour, and a
/// legend under the plot naming the runs.
fn draw_grouped_bars(
    root: &Canvas<'_>,
    figure: &Figure,
    runs: &[String],
    groups: &[BarGroup],
) -> Result<(), DrawError> {
    const LEGEND_HEIGHT: u32 = 36;
    let (upper, legend) = root.split_vertically(PNG_HEIGHT - LEGEND_HEIGHT);
    let values = groups.iter().flat_map(|group| group.values.iter().flatten().copied());
    let (low, high) = bounds(values);
    let (x_low, x_high) = padded_range(low, high, true);
    // Room on the right for the label of the longest bar.
    let x_high = x_high + (x_high - x_low) * 0.08;
    let x = Axis::numeric(x_low, x_high, 8, figure.y_name.clone());
    let count = groups.len();
    let (y, label_area) =
        category_axis(groups.iter().map(|group| group.label.as_str()), &figure.x_name);
    let mut plot = plot_area(&upper, &figure.title, x, y, label_area)?;
    // Each slot keeps a tenth free above and below; the runs share the rest, first on top.
    let runs_count = runs.len().max(1);
    let height = 0.8 / runs_count as f64;
    for (run, _) in runs.iter().enumerate() {
        let color = series_color(run);
        plot.draw_series(groups.iter().enumerate().filter_map(|(rank, group)| {
            let value = (*group.values.get(run)?)?;
            let top = (count - 1 - rank) as f64 + 0.4 - height * run as f64;
            let mut bar = Rectangle::new([(0.0, top - height), (value, top)], color.filled());
            bar.set_margin(1, 1, 0, 0);
            Some(bar)
        }))?;
        // Each bar's value at its end, so that a zero reads apart from a missing value.
        plot.draw_series(groups.iter().enumerate().filter_map(|(rank, group)| {
            let value = (*group.values.get(run)?)?;
            let middle = (count - 1 - rank) as f64 + 0.4 - height * (run as f64 + 0.5);
            let text = Text::new(value_label(value), (4, -7), (FONT_FAMILY, 12));
            Some(EmptyElement::at((value.max(0.0), middle)) + text)
        }))?;
    }
    let mut left = i32::try_from(label_area).unwrap_or(80) + 16;
    for (run, name) in runs.iter().enumerate() {
        let name = short(name);
        legend.draw(&Rectangle::new([(left, 10), (left + 14, 24)], series_color(run).filled()))?;
        legend.draw(&Text::new(name.clone(), (left + 20, 9), (FONT_FAMILY, 15)))?;
        left += 20 + i32::try_from(name.chars().count()).unwrap_or(0) * 8 + 28;
    }
    Ok(())
}

/// A bar's value as its label: at most two decimals, without trailing zeros.
fn value_label(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        return format!("{value:.2e}");
    }
    let text = format!("{value:.2}");
    match text.trim_end_matches('0').trim_end_matches('.') {
        "-0" => "0".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

/// The colour of the `index`th run of a grouped chart.
fn series_color(index: usize) -> RGBColor {
    SERIES_COLORS[index % SERIES_COLORS.len()]
}

fn draw_scatter(
    root: &Canvas<'_>,
    figure: &Figure,
    points: &[(f64, f64)],
) -> Result<(), DrawError> {
    let (x_min, x_max) = bounds(points.iter().map(|point| point.0));
    let (y_min, y_max) = bounds(points.iter().map(|point| point.1));
    let (x_low, x_high) = padded_range(x_min, x_max, false);
    let (y_low, y_high) = padded_range(y_min, y_max, false);
    let x = Axis::numeric(x_low, x_high, 8, figure.x_name.clone());
    let y = Axis::numeric(y_low, y_high, 8, figure.y_name.clone());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    let style = BAR_COLOR.mix(0.6).filled();
    plot.draw_series(points.iter().map(|point| Circle::new(*point, 3, style)))?;
    Ok(())
}

fn draw_histogram(root: &Canvas<'_>, figure: &Figure, bins: &[Bin]) -> Result<(), DrawError> {
    let (x_min, _) = bounds(bins.iter().map(|bin| bin.start));
    let (_, x_max) = bounds(bins.iter().map(|bin| bin.end));
    let (x_low, x_high) = padded_range(x_min, x_max, false);
    let tallest = bins.iter().map(|bin| bin.count).max().unwrap_or(0) as f64;
    let (_, y_high) = padded_range(0.0, tallest, true);
    let mut x = Axis::numeric(x_low, x_high, 8, figure.x_name.clone());
    x.grid = false;
    let y = Axis::numeric(0.0, y_high, 8, "count".to_owned());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    plot.draw_series(bins.iter().map(|bin| {
        let mut bar =
            Rectangle::new([(bin.start, 0.0), (bin.end, bin.count as f64)], BAR_COLOR.filled());
        bar.set_margin(0, 0, 1, 1);
        bar
    }))?;
    Ok(())
}

/// Round tick values (multiples of 1, 2 or 5 times a power of ten) within `low..=high`, about
/// `target` of them; none when the range is degenerate.
fn nice_ticks(low: f64, high: f64, target: usize) -> Vec<f64> {
    let span = high - low;
    if !(span > 0.0 && span.is_finite()) || target == 0 {
        return Vec::new();
    }
    let magnitude = 10f64.powf((span / target as f64).log10().floor());
    let Some(step) = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step > 0.0 && span / step <= target as f64)
    else {
        return Vec::new();
    };
    ticks_every(low, high, step)
}

/// The multiples of `step` within `low..=high`, or none when there would be more than 100.
fn ticks_every(low: f64, high: f64, step: f64) -> Vec<f64> {
    let (first, last) = ((low / step).ceil(), (high / step).floor());
    if !(first.is_finite() && last.is_finite() && first <= last && last - first <= 100.0) {
        return Vec::new();
    }
    (0..=(last - first) as usize).map(|index| (first + index as f64) * step).collect()
}

/// The spacing of ticks on a time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeStep {
    Millis(i64),
    Months(i64),
    Years(i64),
}

/// Ticks on calendar boundaries (whole seconds, minutes, hours, days, months or years, in UTC)
/// within `low..=high` milliseconds, at most seven of them, and the step they use.
fn time_ticks(low: f64, high: f64) -> (Vec<f64>, TimeStep) {
    const SECOND: i64 = 1_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    const FIXED: [i64; 20] = [
        SECOND,
        2 * SECOND,
        5 * SECOND,
        10 * SECOND,
        15 * SECOND,
        30 * SECOND,
        MINUTE,
        2 * MINUTE,
        5 * MINUTE,
        10 * MINUTE,
        15 * MINUTE,
        30 * MINUTE,
        HOUR,
        2 * HOUR,
        3 * HOUR,
        6 * HOUR,
        12 * HOUR,
        MILLIS_PER_DAY,
        2 * MILLIS_PER_DAY,
        7 * MILLIS_PER_DAY,
    ];
    const MAX_TICKS: f64 = 7.0;
    let span = high - low;
    if !(span > 0.0 && span.is_finite() && low.abs() < 1e15 && high.abs() < 1e15) {
        return (Vec::new(), TimeStep::Millis(MILLIS_PER_DAY));
    }
    if let Some(step) = FIXED.into_iter().find(|step| span / *step as f64 <= MAX_TICKS) {
        return (ticks_every(low, high, step as f64), TimeStep::Millis(step));
    }
    let month = 30.44 * MILLIS_PER_DAY as f64;
    let step = [1, 2, 3, 6]
        .into_iter()
        .map(TimeStep::Months)
        .find(|step| matches!(step, TimeStep::Months(months) if span / (*months as f64 * month) <= MAX_TICKS))
        .unwrap_or_else(|| {
            let years = span / (12.0 * month) / MAX_TICKS;
            let magnitude = 10f64.powf(years.log10().floor().max(0.0));
            let factor = [1.0, 2.0, 5.0, 10.0].into_iter().find(|f| f * magnitude >= years).unwrap_or(10.0);
            TimeStep::Years((factor * magnitude) as i64)
        });
    let months_per_tick = match step {
        TimeStep::Months(months) => months,
        TimeStep::Years(years) => years.saturating_mul(12),
        TimeStep::Millis(_) => 1,
    }
    .max(1);
    let (year, month_of_year, _) = civil_from_days((low as i64).div_euclid(MILLIS_PER_DAY));
    // Count months from year 0 and start at the first multiple of the step, so that ticks land
    // on round months and years.
    let mut index = (year * 12 + month_of_year - 1).div_euclid(months_per_tick) * months_per_tick;
    let mut ticks = Vec::new();
    for _ in 0..100 {
        let (tick_year, tick_month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
        let millis = (days_from_civil(tick_year, tick_month, 1) * MILLIS_PER_DAY) as f64;
        if millis > high {
            break;
        }
        if millis >= low {
            ticks.push(millis);
        }
        index += months_per_tick;
    }
    (ticks, step)
}

/// The smallest and largest of finite values, or `(0, 0)` when there are none.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values
        .filter(|value| value.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| (low.min(v), high.max(v)));
    if low <= high { (low, high) } else { (0.0, 0.0) }
}

/// An axis range around `min..max` with 5% padding, widened when it would be empty or too thin
/// for the axis arithmetic; with `include_zero` it also reaches zero (and is not padded there).
fn padded_range(min: f64, max: f64, include_zero: bool) -> (f64, f64) {
    let (mut low, mut high) = if include_zero { (min.min(0.0), max.max(0.0)) } else { (min, max) };
    let span = high - low;
    let magnitude = low.abs().max(high.abs());
    if span <= magnitude * 1e-9 {
        let pad = if magnitude > 1e-200 { magnitude * 0.05 } else { 1.0 };
        low -= pad;
        high += pad;
    } else {
        let pad = span * 0.05;
        if !(include_zero && low == 0.0) {
            low -= pad;
        }
        if !(include_zero && high == 0.0) {
            high += pad;
        }
    }
    (low, high)
}

/// How the ticks of a numeric axis are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberFormat {
    /// Fixed-point with this many decimals.
    Decimals(usize),
    /// Scientific notation with this many digits after the point.
    Scientific(usize),
}

/// Picks a format that tells neighbouring ticks apart: as many decimals as the step between
/// them needs, or scientific notation when they are very large or very small.
fn number_format(ticks: &[f64]) -> NumberFormat {
    let largest = ticks.iter().fold(0.0f64, |largest, tick| largest.max(tick.abs()));
    let step = ticks
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).abs())
        .filter(|step| *step > 0.0)
        .fold(f64::INFINITY, f64::min);
    let step = if step.is_finite() { step } else { largest.max(1.0) };
    let exponent = |value: f64| value.log10().floor();
    if largest >= 1e7 || (largest > 0.0 && largest < 1e-3) || step < 1e-6 {
        NumberFormat::Scientific((exponent(largest) - exponent(step)).clamp(0.0, 6.0) as usize)
    } else {
        NumberFormat::Decimals((-exponent(step)).clamp(0.0, 6.0) as usize)
    }
}

/// Writes a tick value in `format`; zero is `0` (or `0.00`), never `-0` or `0e0`.
fn format_number(value: f64, format: NumberFormat) -> String {
    let text = match format {
        NumberFormat::Decimals(decimals) => format!("{value:.decimals$}"),
        NumberFormat::Scientific(digits) => format!("{value:.digits$e}"),
    };
    let unsigned = text.strip_prefix('-').unwrap_or(&text);
    if !unsigned.parse::<f64>().is_ok_and(|number| number == 0.0) {
        return text;
    }
    match format {
        NumberFormat::Decimals(_) => unsigned.to_owned(),
        NumberFormat::Scientific(_) => "0".to_owned(),
    }
}

/// A tick label on a time axis, as precise as the step between ticks.
fn format_time_label(millis: f64, step: TimeStep) -> String {
    let Some((date, time)) = split_instant(millis) else {
        return String::new();
    };
    let part =
        |text: &str, range: std::ops::Range<usize>| text.get(range).unwrap_or_default().to_owned();
    match step {
        TimeStep::Years(_) => part(&date, 0..4),
        TimeStep::Months(_) => part(&date, 0..7),
        TimeStep::Millis(step) if step >= MILLIS_PER_DAY => date,
        TimeStep::Millis(step) if step >= 60_000 => {
            format!("{} {}", part(&date, 5..10), part(&time, 0..5))
        }
        TimeStep::Millis(_) => part(&time, 0..8),
    }
}

fn short_title(title: &str) -> String {
    truncate_chars(title, MAX_TITLE_CHARS).into_owned()
}

/// A category label for the bar chart: control characters as spaces, and long labels cut in
/// the middle, since categories often differ only at the end.
fn short_label(label: &str) -> String {
    let count = label.chars().count();
    let cut: String = if count <= MAX_LABEL_CHARS {
        label.to_owned()
    } else {
        let head = (MAX_LABEL_CHARS - 1) / 2;
        let tail = MAX_LABEL_CHARS - 1 - head;
        let mut cut: String = label.chars().take(head).collect();
        cut.push('…');
        cut.extend(label.chars().skip(count - tail));
        cut
    };
    cut.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

fn encode_png(pixels: &[u8]) -> Result<Vec<u8>, FormatError> {
    let failed = |error: png::EncodingError| FormatError::Render { reason: error.to_string() };
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, PNG_WIDTH, PNG_HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Balanced);
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(pixels).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_numbers_are_shortened_for_the_png() {
        let cases: Vec<(Vec<f64>, NumberFormat, Vec<&str>)> = vec![
            (vec![0.0, 2.0, 4.0], NumberFormat::Decimals(0), vec!["0", "2", "4"]),
            (vec![-0.2, 0.0, 0.2], NumberFormat::Decimals(1), vec!["-0.2", "0.0", "0.2"]),
            (vec![0.1 + 0.2, 0.4], NumberFormat::Decimals(1), vec!["0.3", "0.4"]),
            (vec![0.0012, 0.0014], NumberFormat::Decimals(4), vec!["0.0012", "0.0014"]),
            (vec![0.00012, 0.00014], NumberFormat::Scientific(1), vec!["1.2e-4", "1.4e-4"]),
            (vec![1e7, 1.5e7, 2e7], NumberFormat::Scientific(1), vec!["1.0e7", "1.5e7", "2.0e7"]),
            (vec![-1e-9, 0.0], NumberFormat::Scientific(0), vec!["-1e-9", "0"]),
            (vec![1e250, 2e250], NumberFormat::Scientific(0), vec!["1e250", "2e250"]),
            (vec![5.0], NumberFormat::Decimals(0), vec!["5"]),
            (vec![], NumberFormat::Decimals(0), vec![]),
        ];
        for (ticks, format, labels) in cases {
            assert_eq!(number_format(&ticks), format, "{ticks:?}");
            let written: Vec<String> = ticks.iter().map(|t| format_number(*t, format)).collect();
            assert_eq!(written, labels, "{ticks:?}");
        }
        assert_eq!(format_number(-0.0001, NumberFormat::Decimals(1)), "0.0");
        assert_eq!(short_label("short"), "short");
        assert_eq!(
            short_label("category with a rather long name 79"),
            "category with…r long name 79"
        );
        assert_eq!(short_label("a\nb"), "a b");
        assert_eq!(truncate_chars("ab", 1), "…");
        for (value, label) in [
            (66.7, "66.7"),
            (100.0, "100"),
            (0.0, "0"),
            (-0.001, "0"),
            (0.126, "0.13"),
            (2e9, "2.00e9"),
        ] {
            assert_eq!(value_label(value), label, "{value}");
        }
        assert_eq!(padded_range(5.0, 5.0, false), (4.75, 5.25));
        assert_eq!(padded_range(0.0, 0.0, true), (-1.0, 1.0));
        assert_eq!(padded_range(2.0, 12.0, true), (0.0, 12.6));
    }

    #[test]
    fn axis_ticks_are_round_and_bounded() {
        let cases: Vec<((f64, f64, usize), Vec<f64>)> = vec![
            ((0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
            ((-1.0, 1.0, 2), vec![-1.0, 0.0, 1.0]),
            ((0.25, 1.0, 3), vec![0.5, 1.0]),
            ((5.0, 5.0, 8), vec![]),
            ((0.0, f64::INFINITY, 8), vec![]),
            ((-f64::MAX, f64::MAX, 8), vec![]),
            ((0.0, 1.0, 0), vec![]),
        ];
        for ((low, high, target), expected) in cases {
            assert_eq!(nice_ticks(low, high, target), expected, "{low}..{high}");
        }
        assert!(nice_ticks(1e16, 1e16 + 4.0, 8).len() <= 101);
        assert!(nice_ticks(0.0, 5e-324, 8).len() <= 101);

        let day = |year, month, day| (days_from_civil(year, month, day) * MILLIS_PER_DAY) as f64;
        let cases: Vec<((f64, f64), TimeStep, Vec<&str>)> = vec![
            (
                (day(2024, 1, 1), day(2024, 1, 11)),
                TimeStep::Millis(2 * MILLIS_PER_DAY),
                vec!["2024-01-02", "2024-01-04", "2024-01-06", "2024-01-08", "2024-01-10"],
            ),
            (
                (day(2020, 1, 1), day(2020, 12, 31)),
                TimeStep::Months(2),
                vec!["2020-01", "2020-03", "2020-05", "2020-07", "2020-09", "2020-11"],
            ),
            (
                (day(1990, 6, 1), day(2023, 4, 1)),
                TimeStep::Years(5),
                vec!["1995", "2000", "2005", "2010", "2015", "2020"],
            ),
            (
                (day(2024, 3, 1) + 3_600_000.0, day(2024, 3, 1) + 4.0 * 3_600_000.0),
                TimeStep::Millis(30 * 60_000),
                vec![
                    "03-01 01:00",
                    "03-01 01:30",
                    "03-01 02:00",
                    "03-01 02:30",
                    "03-01 03:00",
                    "03-01 03:30",
                    "03-01 04:00",
                ],
            ),
            (
                (0.0, 4_000.0),
                TimeStep::Millis(1_000),
                vec!["00:00:00", "00:00:01", "00:00:02", "00:00:03", "00:00:04"],
            ),
        ];
        for ((low, high), step, expected) in cases {
            let (ticks, got) = time_ticks(low, high);
            assert_eq!(got, step, "{low}..{high}");
            let labels: Vec<String> = ticks.iter().map(|t| format_time_label(*t, got)).collect();
            assert_eq!(labels, expected, "{low}..{high}");
        }
        assert_eq!(time_ticks(0.0, f64::MAX).0, Vec::<f64>::new());
        assert!(time_ticks(day(0, 1, 1), day(9999, 12, 31)).0.len() <= 8);
    }
}
