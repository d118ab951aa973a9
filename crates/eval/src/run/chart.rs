//! PNG line charts of score against length, drawn with plotters' bitmap backend and the bundled
//! font (`crate::font`), so no system font is needed.

use std::collections::BTreeSet;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::font::{FONT_FAMILY, register_font};
use crate::run::error::RunError;
use crate::run::report::length_label;
use gattn_model::output::{Existing, write_atomic_with};

/// Every chart has this size in pixels (width, height).
pub const CHART_SIZE: (u32, u32) = (1100, 650);
const LEGEND_WIDTH: u32 = 230;

/// One line of a chart: (length, score in percent) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(usize, f64)>,
    /// Drawn thick and black (the average row).
    pub emphasized: bool,
}

/// Draws `series` on one chart: lengths evenly spaced on the x axis (RULER's lengths double
/// from one to the next), scores 0-100 on the y axis.
/// Written atomically (see `gattn_model::output`).
pub fn write_line_chart(
    path: &Path,
    title: &str,
    series: &[Series],
    existing: Existing,
) -> Result<(), RunError> {
    write_atomic_with(path, existing, |file| draw(file, title, series))?.map_err(|reason| {
        RunError::Chart {
            path: path.to_path_buf(),
            reason,
        }
    })
}

fn draw(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    register_font()?;
    let lengths: Vec<usize> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if lengths.is_empty() {
        return Err("nothing to draw: no scores".into());
    }
    let column = |length: usize| lengths.binary_search(&length).unwrap_or(0) as i32;
    let err = |e: &dyn std::fmt::Display| e.to_string();

    let root = BitMapBackend::new(path, CHART_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    // The legend gets its own column so it never hides a line.
    let (plot_area, legend_area) = root.split_horizontally(CHART_SIZE.0 - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, (FONT_FAMILY, 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((0..lengths.len() as i32 - 1).into_segmented(), 0f64..105f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("length in tokens")
        .y_desc("score, percent")
        .x_labels(lengths.len())
        .y_labels(11)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .max_light_lines(1)
        .light_line_style(RGBColor(240, 240, 240))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => lengths
                .get(*i as usize)
                .map(|&l| length_label(l))
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .label_style((FONT_FAMILY, 15))
        .axis_desc_style((FONT_FAMILY, 17))
        .draw()
        .map_err(|e| err(&e))?;

    let styles: Vec<ShapeStyle> = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s.emphasized {
                BLACK.stroke_width(4)
            } else {
                Palette99::pick(i).stroke_width(2)
            }
        })
        .collect();
    for (s, &style) in series.iter().zip(&styles) {
        let points: Vec<(SegmentValue<i32>, f64)> = s
            .points
            .iter()
            .map(|&(l, score)| (SegmentValue::CenterOf(column(l)), score))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), style))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, style.filled())),
            )
            .map_err(|e| err(&e))?;
    }
    for (row, (s, &style)) in series.iter().zip(&styles).enumerate() {
        let y = 60 + 24 * row as i32;
        legend_area
            .draw(&PathElement::new(vec![(8, y), (36, y)], style))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(
                s.label.clone(),
                (44, y - 8),
                (FONT_FAMILY, 15).into_font(),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
