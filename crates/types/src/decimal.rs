//! Exact decimal numbers (SQL's `DECIMAL(p,s)`): an unscaled `i128` and a
//! scale, so `-1.50` is `(-150, 2)`. A column holds at most
//! [`DECIMAL_PRECISION_MAX`] digits, which always fit an `i128`
//! (`10^38 < 2^127`).
//!
//! Invariant: nothing here panics on any input; arithmetic that would
//! leave the range answers `None` and the caller reports it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;

/// Most digits a DECIMAL column holds (MySQL allows 65; Shoal stores the
/// value exactly in an `i128`, which holds 38).
pub const DECIMAL_PRECISION_MAX: u8 = 38;
/// Most digits after the point (MySQL's limit).
pub const DECIMAL_SCALE_MAX: u8 = 30;

/// An exact decimal number: `unscaled × 10^-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    pub unscaled: i128,
    pub scale: u8,
}

/// `10^n`, or `None` past `i128` (n > 38).
pub fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// Decimal digits of `|x|` (0 has none).
pub fn digits(x: i128) -> u32 {
    let mut n = x.unsigned_abs();
    let mut d = 0;
    while n > 0 {
        n /= 10;
        d += 1;
    }
    d
}

/// `n / d` rounded half away from zero (d ≠ 0), as MySQL rounds decimals.
fn div_round(n: i128, d: i128) -> i128 {
    let (q, r) = (n / d, n % d);
    if r.unsigned_abs() >= d.unsigned_abs() - r.unsigned_abs() {
        // |r| ≥ |d| / 2: away from zero, in the sign of the quotient.
        if (n < 0) != (d < 0) {
            q - 1
        } else {
            q + 1
        }
    } else {
        q
    }
}

impl Decimal {
    pub const ZERO: Decimal = Decimal {
        unscaled: 0,
        scale: 0,
    };

    pub fn new(unscaled: i128, scale: u8) -> Decimal {
        Decimal { unscaled, scale }
    }

    pub fn from_int(i: i128) -> Decimal {
        Decimal::new(i, 0)
    }

    /// Digits before the point plus `scale` (at least the scale).
    pub fn precision(self) -> u32 {
        digits(self.unscaled).max(u32::from(self.scale))
    }

    /// Whether it fits `DECIMAL(precision, self.scale)`.
    pub fn fits(self, precision: u8) -> bool {
        pow10(u32::from(precision))
            .is_some_and(|limit| self.unscaled.unsigned_abs() < limit as u128)
    }

    /// The same number with `scale` fraction digits, rounding half away
    /// from zero when digits are dropped; `None` if it leaves `i128`.
    pub fn rescale(self, scale: u8) -> Option<Decimal> {
        let unscaled = match scale.cmp(&self.scale) {
            Ordering::Equal => self.unscaled,
            Ordering::Greater => self
                .unscaled
                .checked_mul(pow10(u32::from(scale - self.scale))?)?,
            Ordering::Less => match pow10(u32::from(self.scale - scale)) {
                Some(p) => div_round(self.unscaled, p),
                // More than 38 digits dropped: every i128 rounds to 0.
                None => 0,
            },
        };
        Some(Decimal::new(unscaled, scale))
    }

    /// The same number with `scale` fraction digits if no digit is lost.
    pub fn rescale_exact(self, scale: u8) -> Option<Decimal> {
        let d = self.rescale(scale)?;
        (d.cmp_value(self) == Ordering::Equal).then_some(d)
    }

    /// Numeric order, whatever the two scales (no overflow: the integer
    /// parts compare first, then the fractions at the larger scale, which
    /// stay below `10^scale`).
    pub fn cmp_value(self, other: Decimal) -> Ordering {
        let (Some(pa), Some(pb)) = (pow10(u32::from(self.scale)), pow10(u32::from(other.scale)))
        else {
            // Scales past 38 digits: only through a hand-built value.
            return self.to_f64().total_cmp(&other.to_f64());
        };
        let (ia, fa) = (self.unscaled / pa, self.unscaled % pa);
        let (ib, fb) = (other.unscaled / pb, other.unscaled % pb);
        ia.cmp(&ib).then_with(|| {
            let top = self.scale.max(other.scale);
            // |f| < 10^scale ≤ 10^top: the products stay below 10^38.
            let lift = |f: i128, s: u8| pow10(u32::from(top - s)).and_then(|p| f.checked_mul(p));
            match (lift(fa, self.scale), lift(fb, other.scale)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => self.to_f64().total_cmp(&other.to_f64()),
            }
        })
    }

    pub fn to_f64(self) -> f64 {
        // Through the text: exact to the nearest double, unlike a division.
        self.to_string().parse().unwrap_or(0.0)
    }

    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let (a, b) = (self.rescale(scale)?, other.rescale(scale)?);
        Some(Decimal::new(a.unscaled.checked_add(b.unscaled)?, scale))
    }

    pub fn checked_sub(self, other: Decimal) -> Option<Decimal> {
        self.checked_add(Decimal::new(other.unscaled.checked_neg()?, other.scale))
    }

    pub fn checked_mul(self, other: Decimal) -> Option<Decimal> {
        Some(Decimal::new(
            self.unscaled.checked_mul(other.unscaled)?,
            self.scale.checked_add(other.scale)?,
        ))
    }

    /// `self / other` with `scale` fraction digits, rounded half away
    /// from zero; `None` for a zero divisor or a result past `i128`.
    pub fn checked_div(self, other: Decimal, scale: u8) -> Option<Decimal> {
        if other.unscaled == 0 {
            return None;
        }
        // a/10^sa ÷ b/10^sb = (a × 10^(scale + sb - sa)) / b / 10^scale.
        let shift = i32::from(scale) + i32::from(other.scale) - i32::from(self.scale);
        let (num, den) = if shift >= 0 {
            (
                self.unscaled.checked_mul(pow10(shift as u32)?)?,
                other.unscaled,
            )
        } else {
            (
                self.unscaled,
                other.unscaled.checked_mul(pow10(shift.unsigned_abs())?)?,
            )
        };
        Some(Decimal::new(div_round(num, den), scale))
    }

    /// The nearest decimal with `scale` fraction digits to a finite double
    /// (through its shortest text, so `1.005` is 1.005 and not the
    /// binary value just below it).
    pub fn from_f64(x: f64, scale: u8) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        Decimal::parse(&format!("{x}"))?.rescale(scale)
    }

    /// Reads `[+-]digits[.digits][e[+-]digits]` (a leading or trailing
    /// point allowed, as SQL allows `.5` and `5.`). Digits past 38 in the
    /// fraction are rounded away; `None` if it is not such a number or
    /// its integer part needs more than 38 digits.
    pub fn parse(text: &str) -> Option<Decimal> {
        let t = text.trim();
        let (negative, body) = match t.as_bytes().first()? {
            b'-' => (true, &t[1..]),
            b'+' => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(at) => {
                let exp: i32 = body[at + 1..].parse().ok()?;
                (&body[..at], exp)
            }
            None => (body, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction)
        {
            return None;
        }
        // Leading zeros carry nothing; trailing fraction digits past what
        // an i128 holds are rounded below.
        let whole = whole.trim_start_matches('0');
        let mut unscaled: i128 = 0;
        let mut scale: i32 = 0;
        let mut round_up = false;
        for (i, b) in whole.bytes().chain(fraction.bytes()).enumerate() {
            let in_fraction = i >= whole.len();
            let digit = i128::from(b - b'0');
            match unscaled.checked_mul(10).and_then(|u| u.checked_add(digit)) {
                Some(u) if u.unsigned_abs() < 10u128.pow(38) => {
                    unscaled = u;
                    if in_fraction {
                        scale += 1;
                    }
                }
                _ if in_fraction => {
                    round_up = digit >= 5;
                    break;
                }
                _ => return None,
            }
        }
        if round_up {
            unscaled += 1;
        }
        let scale = scale.checked_sub(exponent)?;
        let (unscaled, scale) = if scale < 0 {
            (unscaled.checked_mul(pow10(scale.unsigned_abs())?)?, 0)
        } else if scale > i32::from(DECIMAL_PRECISION_MAX) {
            let d = Decimal::new(unscaled, DECIMAL_PRECISION_MAX);
            let drop = pow10((scale - i32::from(DECIMAL_PRECISION_MAX)) as u32);
            (
                drop.map_or(0, |p| div_round(d.unscaled, p)),
                DECIMAL_PRECISION_MAX,
            )
        } else {
            (unscaled, scale as u8)
        };
        Some(Decimal::new(
            if negative { -unscaled } else { unscaled },
            scale,
        ))
    }
}

/// `-0.50`: exactly `scale` digits after the point, a `0` before it.
impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let (whole, fraction) = if digits.len() > scale {
            digits.split_at(digits.len() - scale)
        } else {
            ("", digits.as_str())
        };
        if self.unscaled < 0 {
            f.write_str("-")?;
        }
        f.write_str(if whole.is_empty() { "0" } else { whole })?;
        if scale > 0 {
            f.write_str(".")?;
            for _ in fraction.len()..scale {
                f.write_str("0")?;
            }
            f.write_str(fraction)?;
        }
        Ok(())
    }
}

/// As its text (`"-0.50"`): JSON numbers lose digits past 2^53, and the
/// text keeps the scale.
impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let text = String::deserialize(d)?;
        Decimal::parse(&text)
            .filter(|_| !text.contains(['e', 'E']))
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not a decimal number")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(d("1.50"), Decimal::new(150, 2));
        assert_eq!(d("-0.5").to_string(), "-0.5");
        assert_eq!(d(".5").to_string(), "0.5");
        assert_eq!(d("5.").to_string(), "5");
        assert_eq!(d("1.5e2").to_string(), "150");
        assert_eq!(d("15e-3").to_string(), "0.015");
        assert_eq!(Decimal::new(-5, 3).to_string(), "-0.005");
        assert_eq!(d("00012.30"), Decimal::new(1230, 2));
        for bad in ["", "-", ".", "1.2.3", "1e", "abc", "1 2", "--1"] {
            assert_eq!(Decimal::parse(bad), None, "{bad}");
        }
        assert_eq!(Decimal::parse(&"9".repeat(39)), None);
        assert!(Decimal::parse(&format!("0.{}", "9".repeat(50))).is_some());
    }

    #[test]
    fn rounds_half_away_from_zero() {
        assert_eq!(d("1.235").rescale(2), Some(d("1.24")));
        assert_eq!(d("-1.235").rescale(2), Some(d("-1.24")));
        assert_eq!(d("1.234").rescale(2), Some(d("1.23")));
        assert_eq!(d("1.5").rescale(3), Some(d("1.500")));
        assert_eq!(d("1.5").rescale_exact(0), None);
        assert_eq!(d("1.50").rescale_exact(1), Some(d("1.5")));
        assert_eq!(Decimal::from_f64(1.005, 2), Some(d("1.01")));
        assert_eq!(
            d("1").checked_div(d("3"), 4),
            Some(d("0.3333")),
            "div_precision_increment"
        );
        assert_eq!(d("2").checked_div(d("3"), 4), Some(d("0.6667")));
        assert_eq!(d("-2").checked_div(d("3"), 4), Some(d("-0.6667")));
        assert_eq!(d("1").checked_div(d("0"), 4), None);
        assert_eq!(d("1.5").checked_mul(d("-2.25")), Some(d("-3.375")));
    }

    proptest! {
        #[test]
        fn order_matches_the_rationals(a in any::<i64>(), sa in 0u8..=18, b in any::<i64>(), sb in 0u8..=18) {
            let (x, y) = (Decimal::new(a.into(), sa), Decimal::new(b.into(), sb));
            // Cross-multiplied in i128 after lifting to a common scale
            // that fits: i64 × 10^18 < 2^127.
            let top = sa.max(sb);
            let lx = i128::from(a) * 10i128.pow(u32::from(top - sa));
            let ly = i128::from(b) * 10i128.pow(u32::from(top - sb));
            prop_assert_eq!(x.cmp_value(y), lx.cmp(&ly));
        }

        #[test]
        fn text_round_trips(u in any::<i128>(), s in 0u8..=38) {
            let x = Decimal::new(u % 10i128.pow(38), s);
            prop_assert_eq!(Decimal::parse(&x.to_string()), Some(x));
        }

        #[test]
        fn parse_never_panics(s in "[-+.eE0-9]{0,60}") {
            let _ = Decimal::parse(&s);
        }
    }
}
