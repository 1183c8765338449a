//! CronJob schedules as kube-controller-manager reads them (robfig/cron's standard parser):
//! five fields — minute, hour, day of month, month, day of week — each `*` (or `?` for the
//! days), a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`, or a list of those; month
//! and weekday names (`jan`, `mon`); `7` is Sunday too; and the macros `@yearly`
//! (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly`. When both day
//! fields are restricted a day matching either runs, as in cron. Schedules run on a time
//! zone's wall clock (`spec.timeZone`, UTC when unset): a time the clock skips when it springs
//! forward does not run that day, and one it passes twice when it falls back runs twice, as
//! robfig/cron's `Next` has kube-controller-manager run them.

use jiff::tz::{AmbiguousOffset, TimeZone};
use time::{Duration, OffsetDateTime, PrimitiveDateTime, Time};

/// How far a time zone's clock turns back at once, at most (an hour, in practice).
const FOLDS_AT_MOST: Duration = Duration::hours(3);

/// A parsed schedule: the allowed values of each field as bit sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    days_of_week: u64,
    /// Whether the day-of-month or day-of-week field was `*` or `?`: then both must match.
    any_day: bool,
    /// The wall clock the fields are read on.
    zone: TimeZone,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field's bits, within `low..=high`, names counted from `names_from`.
fn field(
    text: &str,
    what: &str,
    low: u32,
    high: u32,
    names: &[&str],
    names_from: u32,
) -> Result<(u64, bool), String> {
    let value = |v: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            return Ok(i as u32 + names_from);
        }
        v.parse::<u32>()
            .map_err(|_| format!("failed to parse int from {v:?} in the {what} field"))
    };
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("failed to parse int from {s:?} in the {what} field"))?;
                if step == 0 {
                    return Err(format!(
                        "step of range should be a positive number: {part:?}"
                    ));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (start, end) = match range {
            "*" | "?" => {
                star |= step.is_none();
                (low, high)
            }
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `a/n` runs from a to the end.
                None if step.is_some() => (value(range)?, high),
                None => {
                    let v = value(range)?;
                    (v, v)
                }
            },
        };
        if start < low || end > high || start > end {
            return Err(format!(
                "{range:?} is beyond the {what} field's range {low}-{high}"
            ));
        }
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step.unwrap_or(1);
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses a schedule; the error names what is wrong, as the API's validation reports it.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let text = text.trim();
        let expanded = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            t if t.starts_with('@') => return Err(format!("unrecognized descriptor: {t}")),
            t => t,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: {text:?}",
                fields.len()
            ));
        }
        let (minutes, _) = field(fields[0], "minute", 0, 59, &[], 0)?;
        let (hours, _) = field(fields[1], "hour", 0, 23, &[], 0)?;
        let (days_of_month, dom_star) = field(fields[2], "day of month", 1, 31, &[], 0)?;
        let (months, _) = field(fields[3], "month", 1, 12, &MONTHS, 1)?;
        let (mut days_of_week, dow_star) = field(fields[4], "day of week", 0, 7, &WEEKDAYS, 0)?;
        // 7 is Sunday as well.
        if days_of_week & (1 << 7) != 0 {
            days_of_week = (days_of_week & !(1 << 7)) | 1;
        }
        Ok(Schedule {
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            any_day: dom_star || dow_star,
            zone: TimeZone::UTC,
        })
    }

    /// The schedule on the wall clock of the IANA time zone `name` (`Europe/Paris`); the error
    /// is the controller's words for a zone it does not know.
    pub fn in_time_zone(self, name: &str) -> Result<Schedule, String> {
        let zone = TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))?;
        Ok(Schedule { zone, ..self })
    }

    /// The zone's wall-clock reading of an instant, as a UTC-offset value whose fields are
    /// the wall clock's.
    fn wall_clock(&self, at: OffsetDateTime) -> Option<OffsetDateTime> {
        let timestamp = jiff::Timestamp::from_second(at.unix_timestamp()).ok()?;
        let wall = self.zone.to_datetime(timestamp);
        let date = time::Date::from_calendar_date(
            i32::from(wall.year()),
            time::Month::try_from(wall.month() as u8).ok()?,
            wall.day() as u8,
        )
        .ok()?;
        let clock =
            Time::from_hms(wall.hour() as u8, wall.minute() as u8, wall.second() as u8).ok()?;
        Some(PrimitiveDateTime::new(date, clock).assume_utc())
    }

    /// The instants a wall-clock minute is in the zone: none for one the clock skips, two for
    /// one it passes twice (kube's robfig/cron runs both).
    fn instants(&self, wall: OffsetDateTime) -> Vec<OffsetDateTime> {
        let Some(ambiguous) = self.ambiguous(wall) else {
            return Vec::new();
        };
        let found = match ambiguous.offset() {
            AmbiguousOffset::Gap { .. } => vec![],
            AmbiguousOffset::Unambiguous { .. } => vec![ambiguous.earlier()],
            AmbiguousOffset::Fold { .. } => vec![ambiguous.earlier(), ambiguous.later()],
        };
        found
            .into_iter()
            .filter_map(|t| OffsetDateTime::from_unix_timestamp(t.ok()?.as_second()).ok())
            .collect()
    }

    fn ambiguous(&self, wall: OffsetDateTime) -> Option<jiff::tz::AmbiguousTimestamp> {
        let civil = jiff::civil::DateTime::new(
            i16::try_from(wall.year()).ok()?,
            u8::from(wall.month()) as i8,
            wall.day() as i8,
            wall.hour() as i8,
            wall.minute() as i8,
            0,
            0,
        )
        .ok()?;
        Some(self.zone.to_ambiguous_timestamp(civil))
    }

    fn day_matches(&self, t: OffsetDateTime) -> bool {
        let dom = self.days_of_month & (1 << t.day()) != 0;
        let dow = self.days_of_week & (1 << t.weekday().number_days_from_sunday()) != 0;
        if self.any_day { dom && dow } else { dom || dow }
    }

    /// The first time after `after` (to the minute) that the schedule runs; None when none
    /// comes within five years (such as the 30th of February).
    pub fn next(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        // The wall clock may have turned back within the last hours (a fold): its minutes
        // from before `after` can come again after it, so the search starts that far back
        // and keeps only instants after `after`.
        let lookback = if self.zone == TimeZone::UTC {
            Duration::ZERO
        } else {
            FOLDS_AT_MOST
        };
        let mut wall = self.wall_clock(after - lookback)?;
        loop {
            wall = self.next_on_the_wall(wall)?;
            if let Some(instant) = self.instants(wall).into_iter().find(|i| *i > after) {
                return Some(instant);
            }
        }
    }

    /// The first wall-clock minute after `after` (wall-clock fields) that the fields match.
    fn next_on_the_wall(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        let mut t =
            after.replace_second(0).ok()?.replace_nanosecond(0).ok()? + Duration::minutes(1);
        let limit = after + Duration::days(5 * 366);
        let midnight = |t: OffsetDateTime| t.replace_time(Time::MIDNIGHT);
        while t <= limit {
            if self.months & (1 << u8::from(t.month())) == 0 {
                // The first of the next month.
                let (year, month) = match t.month() {
                    time::Month::December => (t.year() + 1, time::Month::January),
                    m => (t.year(), m.next()),
                };
                t = midnight(t)
                    .replace_day(1)
                    .ok()?
                    .replace_year(year)
                    .ok()?
                    .replace_month(month)
                    .ok()?;
                continue;
            }
            if !self.day_matches(t) {
                t = midnight(t) + Duration::days(1);
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t.replace_minute(0).ok()? + Duration::hours(1);
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t += Duration::minutes(1);
                continue;
            }
            return Some(t);
        }
        None
    }

    /// The latest time in `(since, now]` that the schedule runs, and how many times it ran in
    /// that span (capped at `cap`): the controller starts the latest and says when it missed
    /// many.
    pub fn most_recent(
        &self,
        since: OffsetDateTime,
        now: OffsetDateTime,
        cap: usize,
    ) -> (Option<OffsetDateTime>, usize) {
        let mut latest = None;
        let mut count = 0;
        let mut t = since;
        while let Some(next) = self.next(t).filter(|n| *n <= now) {
            latest = Some(next);
            count += 1;
            t = next;
            if count >= cap {
                // Too many to walk: the latest is found from close to now.
                let near = (now - Duration::days(1)).max(t);
                let (recent, _) = self.most_recent(near, now, usize::MAX);
                return (recent.or(latest), count);
            }
        }
        (latest, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn next_runs_as_cron_does() {
        let at = datetime!(2026-12-05 10:07:30 UTC);
        let cases = [
            ("*/5 * * * *", datetime!(2026-12-05 10:10 UTC)),
            ("* * * * *", datetime!(2026-12-05 10:08 UTC)),
            ("0 * * * *", datetime!(2026-12-05 11:00 UTC)),
            ("@hourly", datetime!(2026-12-05 11:00 UTC)),
            ("30 2 * * *", datetime!(2026-12-06 02:30 UTC)),
            ("@daily", datetime!(2026-12-06 00:00 UTC)),
            // 2026-12-05 is a Saturday.
            ("0 9 * * mon-fri", datetime!(2026-12-07 09:00 UTC)),
            ("0 0 * * 7", datetime!(2026-12-06 00:00 UTC)),
            ("@weekly", datetime!(2026-12-06 00:00 UTC)),
            ("0 0 1 * *", datetime!(2027-01-01 00:00 UTC)),
            ("@yearly", datetime!(2027-01-01 00:00 UTC)),
            ("15 10 5 dec *", datetime!(2026-12-05 10:15 UTC)),
            ("0 10 5 dec *", datetime!(2027-12-05 10:00 UTC)),
            ("0 0 29 feb *", datetime!(2028-02-29 00:00 UTC)),
            ("10-20/5 10 * * *", datetime!(2026-12-05 10:10 UTC)),
            ("8/20 * * * *", datetime!(2026-12-05 10:08 UTC)),
            ("0,45 * * * *", datetime!(2026-12-05 10:45 UTC)),
            // Both days restricted: either matches (the 7th, or a Sunday).
            ("0 0 7 * sun", datetime!(2026-12-06 00:00 UTC)),
        ];
        for (text, expected) in cases {
            let schedule = Schedule::parse(text).unwrap();
            assert_eq!(schedule.next(at), Some(expected), "{text}");
        }
        assert_eq!(Schedule::parse("0 0 30 feb *").unwrap().next(at), None);
    }

    #[test]
    fn a_time_zone_moves_the_wall_clock_and_its_daylight_saving_jumps() {
        let paris = |text: &str| {
            Schedule::parse(text)
                .unwrap()
                .in_time_zone("Europe/Paris")
                .unwrap()
        };
        // Winter: Paris is UTC+1.
        assert_eq!(
            paris("0 9 * * *").next(datetime!(2026-12-05 10:07 UTC)),
            Some(datetime!(2026-12-06 08:00 UTC))
        );
        // Summer: UTC+2.
        assert_eq!(
            paris("0 9 * * *").next(datetime!(2027-06-01 00:00 UTC)),
            Some(datetime!(2027-06-01 07:00 UTC))
        );
        // 2027-03-28 springs forward from 02:00 to 03:00: 02:30 does not run that day.
        assert_eq!(
            paris("30 2 * * *").next(datetime!(2027-03-27 12:00 UTC)),
            Some(datetime!(2027-03-29 00:30 UTC))
        );
        // 2026-10-25 falls back from 03:00 to 02:00: 02:30 comes twice and runs twice.
        let fall = paris("30 2 * * *");
        let first = fall.next(datetime!(2026-10-24 12:00 UTC)).unwrap();
        assert_eq!(first, datetime!(2026-10-25 00:30 UTC));
        let second = fall.next(first).unwrap();
        assert_eq!(second, datetime!(2026-10-25 01:30 UTC));
        assert_eq!(fall.next(second), Some(datetime!(2026-10-26 01:30 UTC)));
        // From late in the first pass, the second pass's earlier minute is still to come.
        assert_eq!(
            paris("10 2 * * *").next(datetime!(2026-10-25 00:50 UTC)),
            Some(datetime!(2026-10-25 01:10 UTC))
        );
        // Every hour on the fall-back day: every real hour, the repeated one too.
        let hourly = paris("0 * * * *");
        let runs: Vec<_> =
            std::iter::successors(hourly.next(datetime!(2026-10-24 23:30 UTC)), |t| {
                hourly.next(*t)
            })
            .take_while(|t| *t < datetime!(2026-10-25 04:00 UTC))
            .collect();
        assert_eq!(
            runs,
            [
                datetime!(2026-10-25 00:00 UTC),
                datetime!(2026-10-25 01:00 UTC),
                datetime!(2026-10-25 02:00 UTC),
                datetime!(2026-10-25 03:00 UTC),
            ]
        );
        assert_eq!(
            Schedule::parse("* * * * *")
                .unwrap()
                .in_time_zone("Mars/Olympus")
                .unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        for (text, said) in [
            ("* * * *", "expected exactly 5 fields, found 4"),
            ("61 * * * *", "beyond the minute field's range 0-59"),
            (
                "* * * foo *",
                "failed to parse int from \"foo\" in the month field",
            ),
            ("*/0 * * * *", "step of range should be a positive number"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ] {
            let why = Schedule::parse(text).unwrap_err();
            assert!(why.contains(said), "{text}: {why}");
        }
    }

    #[test]
    fn the_most_recent_run_and_how_many_were_missed() {
        let every_ten = Schedule::parse("*/10 * * * *").unwrap();
        let since = datetime!(2026-12-05 10:00 UTC);
        assert_eq!(
            every_ten.most_recent(since, datetime!(2026-12-05 10:09:59 UTC), 100),
            (None, 0)
        );
        assert_eq!(
            every_ten.most_recent(since, datetime!(2026-12-05 10:35 UTC), 100),
            (Some(datetime!(2026-12-05 10:30 UTC)), 3)
        );
        let every_minute = Schedule::parse("* * * * *").unwrap();
        let (latest, count) = every_minute.most_recent(
            datetime!(2026-11-01 00:00 UTC),
            datetime!(2026-12-05 10:35:10 UTC),
            100,
        );
        assert_eq!(
            (latest, count),
            (Some(datetime!(2026-12-05 10:35 UTC)), 100)
        );
    }
}
