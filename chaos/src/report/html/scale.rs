//! Linear scales from data to SVG pixels, and the "nice" tick steps (1, 2, 5 × 10ⁿ) that
//! label the report's axes.

/// Maps a data interval onto a pixel interval (the pixel interval may run backwards, as a
/// y axis does: larger values higher up, at smaller y).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Linear {
    /// A scale over `[lo, hi]`; an empty or inverted domain is widened to one unit so that
    /// a run with a single sample or a flat series still draws.
    pub fn new((lo, hi): (f64, f64), (from, to): (f64, f64)) -> Linear {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Linear { lo, hi, from, to }
    }

    pub fn domain(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// The pixel of `v`; values outside the domain are clamped to its edge so a stray
    /// sample cannot draw over a neighbouring panel.
    pub fn map(&self, v: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    /// The multiples of `step` inside the domain.
    pub fn ticks(&self, step: f64) -> Vec<f64> {
        let first = (self.lo / step).ceil() as i64;
        let last = (self.hi / step + 1e-9).floor() as i64;
        (first..=last).map(|k| k as f64 * step).collect()
    }
}

/// The 1, 2 or 5 × 10ⁿ step that cuts `span` into about `target` pieces.
pub fn nice_step(span: f64, target: usize) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// The top of a y axis that starts at 0: `max` rounded up to a whole number of nice steps
/// (1 when there is nothing above 0).
pub fn nice_top(max: f64, target: usize) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let step = nice_step(max, target);
    (max / step - 1e-9).ceil() * step
}

/// A tick label with the decimals its `step` needs: `0`, `2.5`, `150`, `12k`.
pub fn label(v: f64, step: f64) -> String {
    if v.abs() >= 10_000.0 {
        return format!("{}k", fixed(v / 1000.0, step / 1000.0));
    }
    fixed(v, step)
}

fn fixed(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step < 1.0 {
        (-step.log10().floor()).clamp(0.0, 6.0) as usize
    } else {
        0
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_maps_ends_and_middle_and_clamps() {
        let x = Linear::new((0.0, 40.0), (100.0, 500.0));
        assert_eq!(x.map(0.0), 100.0);
        assert_eq!(x.map(40.0), 500.0);
        assert_eq!(x.map(10.0), 200.0);
        assert_eq!(x.map(-5.0), 100.0);
        assert_eq!(x.map(99.0), 500.0);
        // A y axis runs upwards.
        let y = Linear::new((0.0, 200.0), (150.0, 50.0));
        assert_eq!(y.map(200.0), 50.0);
        assert_eq!(y.map(50.0), 125.0);
    }

    #[test]
    fn an_empty_domain_still_draws() {
        let x = Linear::new((5.0, 5.0), (0.0, 10.0));
        assert_eq!(x.domain(), (5.0, 6.0));
        assert_eq!(x.map(5.5), 5.0);
    }

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(40.0, 8), 5.0);
        assert_eq!(nice_step(38.8, 10), 5.0);
        assert_eq!(nice_step(200.0, 4), 50.0);
        assert_eq!(nice_step(3.0, 4), 1.0);
        assert!((nice_step(0.012, 4) - 0.005).abs() < 1e-12);
        assert_eq!(nice_step(180.0, 10), 20.0);
        assert_eq!(nice_step(0.0, 4), 1.0);
        assert_eq!(nice_step(f64::NAN, 4), 1.0);
    }

    #[test]
    fn ticks_are_round_and_inside_the_domain() {
        let x = Linear::new((0.0, 38.8), (0.0, 1.0));
        assert_eq!(
            x.ticks(5.0),
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0]
        );
        let y = Linear::new((2.0, 250.0), (0.0, 1.0));
        assert_eq!(y.ticks(100.0), vec![100.0, 200.0]);
    }

    #[test]
    fn tops_round_up_to_a_step() {
        assert_eq!(nice_top(200.0, 4), 200.0);
        assert_eq!(nice_top(247.0, 4), 300.0);
        assert_eq!(nice_top(2.045, 4), 3.0);
        assert_eq!(nice_top(2.045, 8), 2.5);
        assert_eq!(nice_top(0.0, 4), 1.0);
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(0.0, 50.0), "0");
        assert_eq!(label(2.5, 0.5), "2.5");
        assert_eq!(label(2.0, 0.5), "2.0");
        assert_eq!(label(150.0, 50.0), "150");
        assert_eq!(label(12_000.0, 2000.0), "12k");
        assert_eq!(label(15_000.0, 500.0), "15.0k");
        assert_eq!(label(0.005, 0.005), "0.005");
    }
}
