//! The figure model: what a chart shows (title, axes, one series of a kind), independent of how
//! `drawing` paints it or `chart` writes it as Vega-Lite.

use super::ChartKind;

/// What a chart shows, independent of how it is drawn.
pub(crate) struct Figure {
    pub(crate) title: String,
    pub(crate) description: String,
    pub(crate) x_name: String,
    pub(crate) y_name: String,
    pub(crate) series: Series,
}

pub(crate) enum Series {
    Line {
        points: Vec<(f64, f64)>,
        date_only: bool,
    },
    Bar {
        bars: Vec<(String, f64)>,
    },
    /// Bars grouped by category: each group holds one value per run, in the order of `runs`,
    /// drawn side by side with a legend naming the runs. Groups keep their order.
    GroupedBar {
        runs: Vec<String>,
        groups: Vec<BarGroup>,
    },
    Scatter {
        points: Vec<(f64, f64)>,
    },
    Histogram {
        bins: Vec<Bin>,
    },
}

/// One category of a grouped bar chart: a value per run, `None` where a run has none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BarGroup {
    pub(crate) label: String,
    pub(crate) values: Vec<Option<f64>>,
}

pub(crate) struct Bin {
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) count: usize,
}

impl Figure {
    pub(crate) fn kind(&self) -> ChartKind {
        match self.series {
            Series::Line { .. } => ChartKind::Line,
            Series::Bar { .. } | Series::GroupedBar { .. } => ChartKind::Bar,
            Series::Scatter { .. } => ChartKind::Scatter,
            Series::Histogram { .. } => ChartKind::Histogram,
        }
    }
}
