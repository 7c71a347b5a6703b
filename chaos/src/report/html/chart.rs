//! The run as one inline SVG drawn as text: stacked panels of per-second series and a
//! panel of service state bands, all on one shared time axis, with every action of the
//! timeline as a labelled vertical marker through all of them. Series carry
//! `data-series="<name>"` and bands `data-service`/`data-state`, so the page's own check
//! (`drawn`) can find what it measures.

use std::fmt::Write as _;

use super::bands::{Band, State};
use super::escape;
use super::scale::{label, nice_step, nice_top, Linear};
use crate::plan::Service;
use crate::plan::VersionName;

const WIDTH: f64 = 1320.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 24.0;
/// Room above each panel for its title and legend.
const HEADER: f64 = 26.0;
const PLOT: f64 = 120.0;
const PANEL_GAP: f64 = 14.0;
const BAND_ROW: f64 = 22.0;
const LANE: f64 = 15.0;
const AXIS: f64 = 44.0;
/// Width of one character of the 11 px labels, near enough to keep labels apart.
const CHAR: f64 = 6.3;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Line,
    /// One bar per second, `(t-1, t]`; a non-zero value is never thinner than a hairline.
    Bars,
}

/// One per-second series: `(t, value)`, `None` where the second had nothing to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: &'static str,
    pub color: &'static str,
    pub style: Style,
    pub points: Vec<(f64, Option<f64>)>,
}

/// A chart panel: series sharing one y axis from 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: &'static str,
    /// The values are counts: the y axis has no steps below 1.
    pub counts: bool,
    pub series: Vec<Series>,
}

/// An action of the timeline as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// `kill node-1`.
    pub label: String,
    /// The tooltip: schedule, actual times, error.
    pub detail: String,
    pub start: f64,
    pub end: f64,
    /// The action could not be done.
    pub failed: bool,
    /// The action brings a service back (a start): drawn quieter than the faults, so that
    /// the faults are what the eye finds first.
    pub heal: bool,
}

/// Everything on the shared time axis `[0, end]` seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub end: f64,
    pub panels: Vec<Panel>,
    pub bands: Vec<(Service, Vec<Band>)>,
    pub markers: Vec<Marker>,
}

pub fn state_color(state: State) -> &'static str {
    match state {
        State::Up => "#3fb56b",
        State::Draining => "#f0a030",
        State::Down => "#d9423b",
        State::Paused => "#8b6fd6",
    }
}

impl Figure {
    pub fn svg(&self) -> String {
        let x = Linear::new((0.0, self.end), (LEFT, WIDTH - RIGHT));
        let spans: Vec<(f64, f64)> = self
            .markers
            .iter()
            .map(|m| label_span(&x, m.start, &m.label))
            .collect();
        let lanes = lanes(&spans, 6.0);
        let lane_count = lanes.iter().max().map_or(0, |l| l + 1);
        let top = 8.0 + lane_count as f64 * LANE;
        let bands_height = HEADER + self.bands.len().max(1) as f64 * BAND_ROW;
        let bottom = top + self.panels.len() as f64 * (HEADER + PLOT + PANEL_GAP) + bands_height;
        let height = bottom + AXIS;

        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg class="figure" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="the run on one time axis">"#
        );
        // Lasting faults shade their window behind everything.
        for m in self
            .markers
            .iter()
            .filter(|m| x.map(m.end) - x.map(m.start) >= 2.0)
        {
            let _ = write!(
                svg,
                r#"<rect class="window" x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
                x.map(m.start),
                x.map(m.end) - x.map(m.start),
                bottom - top,
                escape(&m.detail)
            );
        }
        let mut y = top;
        for panel in &self.panels {
            panel_svg(&mut svg, panel, &x, y);
            y += HEADER + PLOT + PANEL_GAP;
        }
        bands_svg(&mut svg, &self.bands, &x, y);
        axis_svg(&mut svg, &x, bottom);
        for (m, lane) in self.markers.iter().zip(&lanes) {
            marker_svg(&mut svg, m, &x, *lane, bottom);
        }
        svg.push_str("</svg>");
        svg
    }
}

/// The pixels a marker's label takes: it starts just right of the line, or ends just left
/// of it when it would run past the right edge.
fn label_span(x: &Linear, t: f64, text: &str) -> (f64, f64) {
    let at = x.map(t);
    let width = text.chars().count() as f64 * CHAR;
    if at + 3.0 + width > WIDTH - 2.0 {
        (at - 3.0 - width, at - 3.0)
    } else {
        (at + 3.0, at + 3.0 + width)
    }
}

/// Assigns each span (in pixels) the first lane where it keeps `pad` from the spans
/// already there, so labels of close actions stack instead of overlapping.
pub fn lanes(spans: &[(f64, f64)], pad: f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].0.total_cmp(&spans[b].0));
    let mut lane_ends: Vec<f64> = Vec::new();
    let mut out = vec![0; spans.len()];
    for i in order {
        let (from, to) = spans[i];
        let lane = match lane_ends.iter().position(|&end| end + pad <= from) {
            Some(lane) => lane,
            None => {
                lane_ends.push(f64::NEG_INFINITY);
                lane_ends.len() - 1
            }
        };
        lane_ends[lane] = to;
        out[i] = lane;
    }
    out
}

fn header_svg(svg: &mut String, title: &str, legend: &[(&str, &str)], y: f64) {
    let _ = write!(
        svg,
        r#"<text class="title" x="{LEFT}" y="{:.1}">{}</text>"#,
        y + 16.0,
        escape(title)
    );
    // 13 px semi-bold runs wider than the 11 px labels.
    let mut lx = LEFT + title.chars().count() as f64 * 8.2 + 20.0;
    for (name, color) in legend {
        let _ = write!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" rx="2" fill="{color}"/><text class="legend" x="{:.1}" y="{:.1}">{}</text>"#,
            y + 7.0,
            lx + 16.0,
            y + 16.0,
            escape(name)
        );
        lx += 16.0 + name.chars().count() as f64 * CHAR + 18.0;
    }
}

fn panel_svg(svg: &mut String, panel: &Panel, x: &Linear, top: f64) {
    let legend: Vec<(&str, &str)> = panel.series.iter().map(|s| (s.name, s.color)).collect();
    header_svg(svg, panel.title, &legend, top);
    let plot_top = top + HEADER;
    let max = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let (top, y_step) = if panel.counts {
        let top = nice_top(max.max(1.0), 4).ceil();
        (top, nice_step(top, 4).max(1.0))
    } else {
        let top = nice_top(max, 4);
        (top, nice_step(top, 4))
    };
    let y = Linear::new((0.0, top), (plot_top + PLOT, plot_top));
    grid_svg(svg, x, &y, y_step, plot_top);
    if panel.series.iter().all(|s| s.points.is_empty()) {
        let _ = write!(
            svg,
            r#"<text class="empty" x="{:.1}" y="{:.1}">no samples</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            plot_top + PLOT / 2.0
        );
    }
    // Bars first, so the lines stay visible on top of them.
    for series in panel.series.iter().filter(|s| s.style == Style::Bars) {
        bars_svg(svg, series, x, &y);
    }
    for series in panel.series.iter().filter(|s| s.style == Style::Line) {
        line_svg(svg, series, x, &y);
    }
}

fn grid_svg(svg: &mut String, x: &Linear, y: &Linear, y_step: f64, plot_top: f64) {
    for v in y.ticks(y_step) {
        let py = y.map(v);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label(v, y_step)
        );
    }
    for t in x.ticks(x_step(x)) {
        let px = x.map(t);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{px:.1}" x2="{px:.1}" y1="{plot_top:.1}" y2="{:.1}"/>"#,
            plot_top + PLOT
        );
    }
    let _ = write!(
        svg,
        r#"<rect class="frame" x="{LEFT}" y="{plot_top:.1}" width="{:.1}" height="{PLOT}"/>"#,
        WIDTH - RIGHT - LEFT
    );
}

fn line_svg(svg: &mut String, series: &Series, x: &Linear, y: &Linear) {
    // A second without a value breaks the line rather than bridging it.
    let mut segments: Vec<Vec<String>> = Vec::new();
    let mut pen_down = false;
    for (t, v) in &series.points {
        match (v, segments.last_mut()) {
            (Some(v), Some(segment)) if pen_down => {
                segment.push(format!("{:.1} {:.1}", x.map(*t), y.map(*v)));
            }
            (Some(v), _) => {
                segments.push(vec![format!("{:.1} {:.1}", x.map(*t), y.map(*v))]);
                pen_down = true;
            }
            (None, _) => pen_down = false,
        }
    }
    if segments.is_empty() {
        return;
    }
    // `h0` ends each piece so that round caps show a lone point as a dot.
    let d: Vec<String> = segments
        .iter()
        .map(|points| format!("M{} h0", points.join(" L")))
        .collect();
    let _ = write!(
        svg,
        r#"<path class="line" data-series="{name}" d="{}" stroke="{}"><title>{name}</title></path>"#,
        d.join(" "),
        series.color,
        name = escape(series.name)
    );
}

fn bars_svg(svg: &mut String, series: &Series, x: &Linear, y: &Linear) {
    let base = y.map(0.0);
    for (t, v) in &series.points {
        let Some(v) = v.filter(|v| *v > 0.0) else {
            continue;
        };
        let x0 = x.map(t - 1.0);
        let height = (base - y.map(v)).max(1.5);
        let _ = write!(
            svg,
            r#"<rect data-series="{name}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" fill="{}" fill-opacity="0.75"><title>{name}: {} at {}s</title></rect>"#,
            base - height,
            (x.map(*t) - x0 - 0.5).max(1.0),
            series.color,
            label(v, 1.0),
            label(*t, 0.1),
            name = escape(series.name)
        );
    }
}

fn bands_svg(svg: &mut String, bands: &[(Service, Vec<Band>)], x: &Linear, top: f64) {
    let legend: Vec<(&str, &str)> = State::ALL
        .iter()
        .map(|s| (s.as_str(), state_color(*s)))
        .collect();
    header_svg(svg, "Services", &legend, top);
    let mut row = top + HEADER;
    if bands.is_empty() {
        let _ = write!(
            svg,
            r#"<text class="empty" x="{:.1}" y="{:.1}">no service events</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            row + 15.0
        );
    }
    for (service, bands) in bands {
        let name = service.to_string();
        let _ = write!(
            svg,
            r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            row + 15.0,
            escape(&name)
        );
        // Versions are written out only in a run that has more than the built-in one.
        let versioned = bands
            .iter()
            .filter_map(|b| b.version.as_deref())
            .any(|v| v != VersionName::BUILT_IN.as_str());
        let mut shown: Option<&str> = None;
        for band in bands {
            let x0 = x.map(band.from);
            let width = (x.map(band.to) - x0).max(1.0);
            let version = band.version.as_deref();
            let (attribute, on) = match version {
                Some(v) => (
                    format!(r#" data-version="{}""#, escape(v)),
                    format!(" on {}", escape(v)),
                ),
                None => (String::new(), String::new()),
            };
            let _ = write!(
                svg,
                r#"<rect data-service="{name}" data-state="{state}"{attribute} x="{x0:.1}" y="{:.1}" width="{width:.1}" height="{:.1}" fill="{}"><title>{name} {state}{on}: {}s to {}s</title></rect>"#,
                row + 3.0,
                BAND_ROW - 6.0,
                state_color(band.state),
                label(band.from, 0.1),
                label(band.to, 0.1),
                name = escape(&name),
                state = band.state.as_str(),
            );
            // Each version written where the node starts running it, when the plan has any.
            let first_up = band.state == State::Up && shown != version;
            if let Some(v) = version.filter(|_| versioned && first_up) {
                let _ = write!(
                    svg,
                    r#"<text class="version" x="{:.1}" y="{:.1}">{}</text>"#,
                    x0 + 3.0,
                    row + 15.0,
                    escape(v)
                );
                shown = Some(v);
            }
        }
        row += BAND_ROW;
    }
}

/// About a dozen ticks on the time axis.
fn x_step(x: &Linear) -> f64 {
    let (lo, hi) = x.domain();
    nice_step(hi - lo, 12)
}

fn axis_svg(svg: &mut String, x: &Linear, y: f64) {
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/>"#,
        WIDTH - RIGHT
    );
    let step = x_step(x);
    for t in x.ticks(step) {
        let px = x.map(t);
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{px:.1}" x2="{px:.1}" y1="{y:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}s</text>"#,
            y + 5.0,
            y + 18.0,
            label(t, step)
        );
    }
    let _ = write!(
        svg,
        r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the run started</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        y + 36.0
    );
}

fn marker_svg(svg: &mut String, m: &Marker, x: &Linear, lane: usize, bottom: f64) {
    let px = x.map(m.start);
    let (from, _) = label_span(x, m.start, &m.label);
    let label_y = 8.0 + lane as f64 * LANE + 10.0;
    let class = match (m.failed, m.heal) {
        (true, _) => "marker failed",
        (false, true) => "marker heal",
        (false, false) => "marker",
    };
    let _ = write!(
        svg,
        r#"<g class="{class}"><title>{}</title><line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{bottom:.1}"/><text x="{from:.1}" y="{label_y:.1}">{}</text></g>"#,
        escape(&m.detail),
        label_y - 9.0,
        escape(&m.label)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_labels_stack_and_far_ones_share_a_lane() {
        let spans = [
            (100.0, 160.0),
            (130.0, 190.0),
            (170.0, 220.0),
            (400.0, 450.0),
        ];
        assert_eq!(lanes(&spans, 6.0), vec![0, 1, 0, 0]);
        // Order of the input does not matter, only positions.
        let shuffled = [(400.0, 450.0), (130.0, 190.0), (100.0, 160.0)];
        assert_eq!(lanes(&shuffled, 6.0), vec![0, 1, 0]);
        assert!(lanes(&[], 6.0).is_empty());
    }

    #[test]
    fn a_label_near_the_right_edge_turns_left() {
        let x = Linear::new((0.0, 100.0), (LEFT, WIDTH - RIGHT));
        let (from, to) = label_span(&x, 10.0, "kill node-1");
        assert!(from > x.map(10.0) && to > from);
        let (from, to) = label_span(&x, 100.0, "kill node-1");
        assert!(to < x.map(100.0) && from < to);
    }

    #[test]
    fn gaps_break_lines_and_bars_cover_their_second() {
        let x = Linear::new((0.0, 10.0), (0.0, 100.0));
        let y = Linear::new((0.0, 10.0), (100.0, 0.0));
        let mut svg = String::new();
        let series = Series {
            name: "p99",
            color: "#000",
            style: Style::Line,
            points: vec![
                (1.0, Some(1.0)),
                (2.0, Some(2.0)),
                (3.0, None),
                (4.0, Some(4.0)),
            ],
        };
        line_svg(&mut svg, &series, &x, &y);
        assert!(
            svg.contains(r#"d="M10.0 90.0 L20.0 80.0 h0 M40.0 60.0 h0""#),
            "{svg}"
        );
        let mut svg = String::new();
        let bars = Series {
            style: Style::Bars,
            points: vec![(3.0, Some(0.0)), (4.0, Some(0.001))],
            ..series
        };
        bars_svg(&mut svg, &bars, &x, &y);
        assert_eq!(svg.matches("<rect").count(), 1, "{svg}");
        assert!(
            svg.contains(r#"x="30.0""#) && svg.contains(r#"height="1.5""#),
            "{svg}"
        );
    }

    #[test]
    fn the_figure_escapes_labels_and_draws_every_part() {
        let figure = Figure {
            end: 40.0,
            panels: vec![Panel {
                title: "Players online",
                counts: true,
                series: vec![Series {
                    name: "online",
                    color: "#000",
                    style: Style::Line,
                    points: vec![(1.0, Some(5.0)), (2.0, Some(6.0))],
                }],
            }],
            bands: vec![(
                Service::Node(1),
                vec![Band {
                    state: State::Down,
                    from: 3.0,
                    to: 5.0,
                    version: None,
                }],
            )],
            markers: vec![
                Marker {
                    label: "kill <node-1>".into(),
                    detail: "a & b".into(),
                    start: 3.0,
                    end: 10.0,
                    failed: true,
                    heal: false,
                },
                Marker {
                    label: "start node-1".into(),
                    detail: "c".into(),
                    start: 20.0,
                    end: 20.5,
                    failed: false,
                    heal: true,
                },
            ],
        };
        let svg = figure.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("kill &lt;node-1&gt;") && !svg.contains("<node-1>"));
        assert!(svg.contains("a &amp; b"));
        assert!(svg.contains("node-1 down: 3.0s to 5.0s"), "{svg}");
        assert!(svg.contains(r#"class="window""#));
        assert!(svg.contains(r#"class="marker failed""#));
        assert!(svg.contains(r#"class="marker heal""#));
    }
}
