//! PNG line charts of accuracy against the privacy budget: MSE (log scale) against ε (linear),
//! one line with markers per strategy, panels side by side (as Fig. 4 of Wang et al., ICDE 2019).
//!
//! Text is drawn with plotters' `ab_glyph` renderer and the DejaVu Sans font embedded in the binary
//! (`assets/DejaVuSans.ttf`, Bitstream Vera licence in `assets/DejaVuSans-LICENSE.txt`), so no
//! system font or fontconfig is needed at build or run time. Plotters 0.3.7's `ab_glyph` renderer
//! lays text out correctly but draws each glyph without its left side bearing (letters collide or
//! drift apart: "adul t.csv"), so [`TextFix`] wraps the bitmap backend and draws text itself from
//! the same layout. Plotters draws into an RGB buffer and
//! the `png` crate encodes it (plotters' own `bitmap_encoder` would pull in `image` with JPEG
//! support: about 14 CPU-seconds more per clean build for nothing used here).

use ab_glyph::{Font, FontRef, ScaleFont, point};
use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::coord::combinators::{BindKeyPoints, IntoLogRange};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};
use std::path::Path;
use std::sync::OnceLock;

/// One line: `points` are (ε, MSE); points with a non-positive or non-finite MSE are left out
/// (they have no place on a log axis).
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One chart: a title above it, the y-axis description, and its lines.
pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

const PANEL_W: u32 = 600;
const PANEL_H: u32 = 480;
const TITLE_H: u32 = 44;

/// Colour-blind-safe (Okabe–Ito) line colours; markers differ too, so the lines stay apart in grey.
const COLORS: [RGBColor; 9] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(128, 128, 128),
    RGBColor(153, 0, 0),
];

/// Registers the font with plotters (for its text layout) and returns it (for [`TextFix`]).
fn font() -> Result<&'static FontRef<'static>> {
    static FONT_REF: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT_REF
        .get_or_init(|| {
            register_font(FAMILY, FontStyle::Normal, FONT).ok()?;
            FontRef::try_from_slice(FONT).ok()
        })
        .as_ref()
        .ok_or_else(|| anyhow!("the embedded font DejaVuSans.ttf could not be parsed"))
}

/// The bitmap backend with text drawn here: glyphs placed at their outline bounds (plotters 0.3.7
/// drops the left side bearing), on the layout box plotters measures (sum of advances and kerning
/// × size/1.24), anchored and rotated as plotters' default `draw_text` does.
struct TextFix<'a> {
    inner: BitMapBackend<'a>,
    font: &'static FontRef<'static>,
}

type BackendResult<T = ()> = Result<T, DrawingErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

impl DrawingBackend for TextFix<'_> {
    type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> BackendResult {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> BackendResult {
        self.inner.present()
    }
    fn draw_pixel(&mut self, p: BackendCoord, c: BackendColor) -> BackendResult {
        self.inner.draw_pixel(p, c)
    }
    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
    ) -> BackendResult {
        self.inner.draw_line(a, b, s)
    }
    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        a: BackendCoord,
        b: BackendCoord,
        s: &S,
        fill: bool,
    ) -> BackendResult {
        self.inner.draw_rect(a, b, s, fill)
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, (w, h): (u32, u32), src: &[u8]) -> BackendResult {
        self.inner.blit_bitmap(pos, (w, h), src)
    }
    fn draw_text<S: BackendTextStyle>(&mut self, text: &str, style: &S, pos: BackendCoord) -> BackendResult {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let font = self.font.as_scaled(size);
        // Caret positions on a baseline 0.72·size below the box top (DejaVu's capitals, 0.63·size
        // tall, then sit centred in plotters' box of height size/1.24).
        let baseline = 0.72 * size;
        let (mut caret, mut prev) = (0.0f32, None);
        let mut glyphs = Vec::with_capacity(text.len());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                caret += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(size, point(caret, baseline)));
            caret += font.h_advance(id);
            prev = Some(id);
        }
        let (width, height) = (caret as i32, (style.size() / 1.24) as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        let mut pixels = Vec::new();
        for g in glyphs {
            if let Some(outline) = self.font.outline_glyph(g) {
                let b = outline.px_bounds();
                outline.draw(|x, y, coverage| {
                    let (tx, ty) = trans.transform(b.min.x as i32 + x as i32 + dx, b.min.y as i32 + y as i32 + dy);
                    pixels.push(((pos.0 + tx, pos.1 + ty), coverage));
                });
            }
        }
        for ((x, y), coverage) in pixels {
            if x >= 0 && y >= 0 && (x as u32) < w && (y as u32) < h && coverage > 0.0 {
                self.inner.draw_pixel((x, y), color.mix(coverage.min(1.0) as f64))?;
            }
        }
        Ok(())
    }
}

/// The y axis of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YScale {
    /// Logarithmic (errors spanning decades: MSE).
    Log,
    /// Linear (rates on a narrow range: misclassification).
    Linear,
}

/// Writes `panels` side by side under `title` as a PNG at `path` (log y axis).
pub fn line_panels_png(path: &Path, title: &str, panels: &[Panel]) -> Result<()> {
    line_panels_png_scaled(path, title, panels, YScale::Log)
}

/// Writes `panels` side by side under `title` as a PNG at `path`, with the given y axis.
pub fn line_panels_png_scaled(path: &Path, title: &str, panels: &[Panel], scale: YScale) -> Result<()> {
    if panels.is_empty() {
        bail!("nothing to plot: no panels");
    }
    let font = font()?;
    let size = (PANEL_W * panels.len() as u32, PANEL_H + TITLE_H);
    let mut rgb = vec![0u8; 3 * size.0 as usize * size.1 as usize];
    {
        let root = TextFix { inner: BitMapBackend::with_buffer(&mut rgb, size), font }.into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let root = root.titled(title, (FAMILY, 26)).map_err(plot_err)?;
        for (area, panel) in root.split_evenly((1, panels.len())).iter().zip(panels) {
            match scale {
                YScale::Log => draw_panel(area, panel)?,
                YScale::Linear => draw_panel_linear(area, panel)?,
            }
        }
        root.present().map_err(plot_err)?;
    }
    write_png(path, size, &rgb).with_context(|| format!("writing {}", path.display()))
}

/// Encodes 8-bit RGB pixels as a PNG at `path` (via `path.tmp` and a rename, so a reader never
/// sees half a file).
fn write_png(path: &Path, (w, h): (u32, u32), rgb: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut enc = png::Encoder::new(file, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn plot_err<E: std::error::Error + Send + Sync + 'static>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("plotting failed: {e}")
}

fn drawable(s: &Series) -> Vec<(f64, f64)> {
    let mut p: Vec<(f64, f64)> =
        s.points.iter().copied().filter(|&(x, y)| x.is_finite() && y.is_finite() && y > 0.0).collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p
}

/// Tick positions of a log axis over [lo, hi]: decades, plus 2 and 5 times them when the range
/// spans few decades.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let span = (hi / lo).log10();
    let mults: &[f64] = if span <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else if span <= 4.5 {
        &[1.0, 3.0]
    } else {
        &[1.0]
    };
    let step = ((d1 - d0) / 6).max(1) as usize;
    (d0..=d1)
        .step_by(step)
        .flat_map(|d| mults.iter().map(move |m| m * 10f64.powi(d)))
        .filter(|&v| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9))
        .collect()
}

/// `10⁻³`, `2·10⁻⁴`, `1`, `10`: tick labels of a log axis, as in the papers' figures.
fn fmt_log(v: f64) -> String {
    const SUP: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let e = (v.log10() + 1e-9).floor() as i32;
    let m = v / 10f64.powi(e);
    let mant = if (m - m.round()).abs() < 1e-6 { format!("{}", m.round()) } else { format!("{m:.1}") };
    let pow = match e {
        0 => String::new(),
        1 => "10".to_string(),
        _ => {
            let digits: String = e.unsigned_abs().to_string().bytes().map(|b| SUP[(b - b'0') as usize]).collect();
            format!("10{}{digits}", if e < 0 { "⁻" } else { "" })
        }
    };
    match (mant.as_str(), pow.is_empty()) {
        (_, true) => mant,
        ("1", false) => pow,
        _ => format!("{mant}·{pow}"),
    }
}

fn fmt_x(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn draw_panel(area: &DrawingArea<TextFix<'_>, Shift>, panel: &Panel) -> Result<()> {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = panel.series.iter().map(|s| (s.label.as_str(), drawable(s))).collect();
    let all: Vec<(f64, f64)> = lines.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let (mut x0, mut x1) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y0, mut y1) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if all.is_empty() {
        (x0, x1, y0, y1) = (0.0, 1.0, 1e-6, 1.0);
    }
    if x1 - x0 < 1e-12 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    // Room around the data: 4% of the x range, a third of a decade (at least) on y.
    let pad = 0.04 * (x1 - x0);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let (y0, y1) = if y1 / y0 < 10.0 {
        let mid = (y0 * y1).sqrt();
        (mid / 10f64.sqrt() / 10f64.powf(1.0 / 3.0), mid * 10f64.sqrt() * 10f64.powf(1.0 / 3.0))
    } else {
        (y0 / 10f64.powf(1.0 / 3.0), y1 * 10f64.powf(1.0 / 3.0))
    };

    // About ten x ticks at round steps (0.5, 1, 1.5, … for ε in [0.5, 4]).
    let x_range = x0..x1;
    let y_range = (y0..y1).log_scale().with_key_points(log_ticks(y0, y1));

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 22))
        .margin(12)
        .margin_right(22)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d(x_range, y_range)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("ε (privacy budget)")
        .y_desc(&panel.y_label)
        .axis_desc_style((FAMILY, 18))
        .label_style((FAMILY, 16))
        .x_labels(10)
        .x_label_formatter(&|v| fmt_x(*v))
        .y_label_formatter(&|v| fmt_log(*v))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_err)?;

    draw_lines_and_legend(&mut chart, &lines)
}

/// A panel with a linear y axis from a little below the lowest to a little above the highest
/// point (rates: drawable keeps y > 0, so a zero rate is left out as on a log axis).
fn draw_panel_linear(area: &DrawingArea<TextFix<'_>, Shift>, panel: &Panel) -> Result<()> {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = panel.series.iter().map(|s| (s.label.as_str(), drawable(s))).collect();
    let all: Vec<(f64, f64)> = lines.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let (mut x0, mut x1) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y0, mut y1) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if all.is_empty() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1e-12 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    if y1 - y0 < 1e-12 {
        (y0, y1) = (y0 - 0.05 * y0.abs().max(1e-3), y1 + 0.05 * y1.abs().max(1e-3));
    }
    let pad = 0.04 * (x1 - x0);
    // Room above for the legend.
    let (ylo, yhi) = ((y0 - 0.05 * (y1 - y0)).max(0.0), y1 + 0.45 * (y1 - y0));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 22))
        .margin(12)
        .margin_right(22)
        .x_label_area_size(52)
        .y_label_area_size(84)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), ylo..yhi)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("ε (privacy budget)")
        .y_desc(&panel.y_label)
        .axis_desc_style((FAMILY, 18))
        .label_style((FAMILY, 16))
        .x_labels(10)
        .y_labels(8)
        .x_label_formatter(&|v| fmt_x(*v))
        .y_label_formatter(&|v| fmt_x(*v))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(plot_err)?;
    draw_lines_and_legend(&mut chart, &lines)
}

/// Marker shapes by series index: circle, triangle, square, diamond, …
fn marker<DB: DrawingBackend>(
    i: usize,
    c: (i32, i32),
    r: i32,
    style: ShapeStyle,
) -> DynElement<'static, DB, (i32, i32)> {
    let (x, y) = c;
    match i % 4 {
        0 => Circle::new(c, r, style).into_dyn(),
        1 => Polygon::new(vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)], style).into_dyn(),
        2 => Rectangle::new([(x - r + 1, y - r + 1), (x + r - 1, y + r - 1)], style).into_dyn(),
        _ => Polygon::new(vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)], style).into_dyn(),
    }
}

/// Draws each series as a line with markers, and the legend (shared by the log and linear panels).
fn draw_lines_and_legend<'a, X, Y>(
    chart: &mut ChartContext<'a, TextFix<'a>, Cartesian2d<X, Y>>,
    lines: &[(&str, Vec<(f64, f64)>)],
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (label, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let line = color.stroke_width(2);
        let fill = color.filled();
        chart.draw_series(LineSeries::new(pts.iter().copied(), line)).map_err(plot_err)?.label(*label).legend(
            move |(x, y)| {
                EmptyElement::at((x + 12, y))
                    + PathElement::new(vec![(-12, 0), (12, 0)], line)
                    + marker(i, (0, 0), 5, fill)
            },
        );
        chart.draw_series(pts.iter().map(|&p| EmptyElement::at(p) + marker(i, (0, 0), 5, fill))).map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 16))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .legend_area_size(36)
        .margin(10)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Panel> {
        let eps = [0.5, 1.0, 2.0, 4.0];
        let series = |scale: f64| {
            vec![
                Series { label: "split".into(), points: eps.iter().map(|&e| (e, scale * 4.0 / (e * e))).collect() },
                Series { label: "sample-k".into(), points: eps.iter().map(|&e| (e, scale / (e * e))).collect() },
            ]
        };
        vec![
            Panel { title: "numeric".into(), y_label: "MSE".into(), series: series(1e-2) },
            Panel { title: "categorical".into(), y_label: "MSE".into(), series: series(1e-4) },
        ]
    }

    #[test]
    fn writes_a_png() {
        let path = std::env::temp_dir().join(format!("harmony-plot-test-{}.png", std::process::id()));
        line_panels_png(&path, "MSE against ε", &sample()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((w, h), (2 * PANEL_W, PANEL_H + TITLE_H));
        // Lines, markers and anti-aliased text compress to tens of kB; a blank canvas to ~2 kB.
        assert!(bytes.len() > 10_000 && bytes.len() < 2_000_000, "PNG of {} bytes", bytes.len());
    }

    #[test]
    fn linear_axis_png() {
        let path = std::env::temp_dir().join(format!("harmony-plot-test-lin-{}.png", std::process::id()));
        line_panels_png_scaled(&path, "rates", &sample()[..1], YScale::Linear).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn empty_and_degenerate_inputs() {
        let path = std::env::temp_dir().join(format!("harmony-plot-test-empty-{}.png", std::process::id()));
        assert!(line_panels_png(&path, "t", &[]).is_err());
        let panels = vec![Panel {
            title: "one point, one zero".into(),
            y_label: "MSE".into(),
            series: vec![Series { label: "a".into(), points: vec![(1.0, 0.0), (1.0, 3e-3)] }],
        }];
        line_panels_png(&path, "t", &panels).unwrap();
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn ticks() {
        let t = log_ticks(1.5e-4, 9e-3);
        let want = [2e-4, 5e-4, 1e-3, 2e-3, 5e-3];
        assert_eq!(t.len(), want.len(), "{t:?}");
        assert!(t.iter().zip(want).all(|(a, b)| (a / b - 1.0).abs() < 1e-9), "{t:?}");
        assert_eq!(fmt_log(1e-3), "10⁻³");
        assert_eq!(fmt_log(2e-5), "2·10⁻⁵");
        assert_eq!(fmt_log(1e-12), "10⁻¹²");
        assert_eq!(fmt_log(1.0), "1");
        assert_eq!(fmt_log(5.0), "5");
        assert_eq!(fmt_log(10.0), "10");
        assert_eq!(fmt_log(300.0), "3·10²");
        assert_eq!(fmt_x(0.5), "0.5");
        assert_eq!(fmt_x(4.0), "4");
    }
}
