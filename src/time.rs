//! Time is injected: the core takes `now` as milliseconds since the Unix epoch
//! from the adapter, and only formats it here.

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type Millis = i64;

/// Formats a timestamp as RFC 3339 / ISO 8601 in UTC with millisecond
/// precision, for example `2026-08-21T10:30:00.000Z`. Years outside
/// 0000..=9999 are clamped, which no real clock produces.
pub fn iso8601(ms: Millis) -> String {
    let ms = ms.clamp(-62_167_219_200_000, 253_402_300_799_999);
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1000, rest % 1000);
    // Written digit by digit (every task write renders two of these).
    let mut out = String::with_capacity(24);
    for (n, width, after) in [
        (y, 4, '-'),
        (i64::from(m), 2, '-'),
        (i64::from(d), 2, 'T'),
        (h, 2, ':'),
        (min, 2, ':'),
        (s, 2, '.'),
        (milli, 3, 'Z'),
    ] {
        for place in (0..width).rev() {
            let digit = (n / 10_i64.pow(place)).rem_euclid(10);
            out.push(char::from(b'0' + digit as u8));
        }
        out.push(after);
    }
    out
}

/// Days since the epoch to a proleptic Gregorian (year, month, day), after
/// Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_787_481_000_000), "2026-08-23T10:30:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(iso8601(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso8601(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso8601(i64::MIN), "0000-01-01T00:00:00.000Z");
    }

    #[test]
    fn every_day_boundary_over_four_centuries_is_consistent() {
        // Walk day by day from 1900 to 2300 and check the calendar advances by
        // exactly one day each time (month lengths and leap years included).
        let mut prev = civil_from_days(-25_567);
        assert_eq!(prev, (1900, 1, 1));
        for z in -25_566..120_000 {
            let cur = civil_from_days(z);
            let next_expected = if cur.2 == 1 {
                let (py, pm, _) = prev;
                if cur.1 == 1 {
                    (py + 1, 1) == (cur.0, cur.1)
                } else {
                    (py, pm + 1) == (cur.0, cur.1)
                }
            } else {
                (prev.0, prev.1, prev.2 + 1) == cur
            };
            assert!(next_expected, "{prev:?} -> {cur:?}");
            if cur.2 == 1 {
                let len = prev.2;
                let leap = (prev.0 % 4 == 0 && prev.0 % 100 != 0) || prev.0 % 400 == 0;
                let want = match prev.1 {
                    2 => {
                        if leap {
                            29
                        } else {
                            28
                        }
                    }
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                assert_eq!(len, want, "{prev:?}");
            }
            prev = cur;
        }
    }
}
