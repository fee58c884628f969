//! Load profiles: what a load generator drives over time.
//!
//! Closed-loop profiles ([`LoadProfile::Users`], [`LoadProfile::Ramp`]) keep a number of
//! simulated users busy, each sending its next request when the previous one returned;
//! open-loop profiles ([`LoadProfile::Rate`], [`LoadProfile::Steps`]) send requests at a
//! target rate whatever the responses; [`LoadProfile::Simultaneous`] sends N requests at
//! the same instant, once.

use super::LoadError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a load generator drives over time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum LoadProfile {
    /// Closed loop: `users` users for `duration`, all from the start.
    Users {
        /// Simulated users (connections for wrk).
        users: u32,
        /// How long the load lasts.
        duration: Duration,
    },
    /// Closed loop: users grow linearly from `from` to `to` over `over`, then `to` users
    /// for `hold` (seed 003: 1 → 100 over 720 s, hold 80 s).
    Ramp {
        /// Users at the start.
        from: u32,
        /// Users at the end of the ramp and during the hold.
        to: u32,
        /// How long the ramp lasts.
        over: Duration,
        /// How long `to` users are held after the ramp.
        hold: Duration,
    },
    /// Open loop: `rate` requests per second for `duration`.
    Rate {
        /// Target requests per second.
        rate: f64,
        /// How long the load lasts.
        duration: Duration,
    },
    /// Open loop: each step's rate (requests per second) for its duration, one after another.
    Steps {
        /// (requests per second, duration) of each step, in order.
        steps: Vec<(f64, Duration)>,
    },
    /// `requests` requests sent at the same instant, once.
    Simultaneous {
        /// How many requests (one per simulated user).
        requests: u32,
    },
}

impl LoadProfile {
    /// The profile's word, as in errors and specs: `users`, `ramp`, `rate`, `steps` or
    /// `simultaneous`.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadProfile::Users { .. } => "users",
            LoadProfile::Ramp { .. } => "ramp",
            LoadProfile::Rate { .. } => "rate",
            LoadProfile::Steps { .. } => "steps",
            LoadProfile::Simultaneous { .. } => "simultaneous",
        }
    }

    /// Whether the profile is open loop (a target rate: [`LoadProfile::Rate`],
    /// [`LoadProfile::Steps`]).
    pub fn is_open_loop(&self) -> bool {
        matches!(self, LoadProfile::Rate { .. } | LoadProfile::Steps { .. })
    }

    /// How long the load is meant to last: the duration, ramp plus hold, or the sum of
    /// the steps; zero for [`LoadProfile::Simultaneous`] (one burst).
    pub fn duration(&self) -> Duration {
        match self {
            LoadProfile::Users { duration, .. } | LoadProfile::Rate { duration, .. } => *duration,
            LoadProfile::Ramp { over, hold, .. } => *over + *hold,
            LoadProfile::Steps { steps } => steps.iter().map(|(_, d)| *d).sum(),
            LoadProfile::Simultaneous { .. } => Duration::ZERO,
        }
    }

    /// Closed-loop profiles: the users meant to be active at `t` since the start
    /// (for the report's overlay); `None` for open-loop profiles and after the end.
    /// A ramp's users at `t` are `from + (to − from)·t/over`, not rounded.
    pub fn users_at(&self, t: Duration) -> Option<f64> {
        if t > self.duration() {
            return None;
        }
        match self {
            LoadProfile::Users { users, .. } => Some(f64::from(*users)),
            LoadProfile::Ramp { from, to, over, .. } => {
                let (from, to) = (f64::from(*from), f64::from(*to));
                if t >= *over || over.is_zero() {
                    Some(to)
                } else {
                    Some(from + (to - from) * t.as_secs_f64() / over.as_secs_f64())
                }
            }
            LoadProfile::Simultaneous { requests } => Some(f64::from(*requests)),
            LoadProfile::Rate { .. } | LoadProfile::Steps { .. } => None,
        }
    }

    /// Open-loop profiles: the target rate (requests per second) at `t` since the start;
    /// `None` for closed-loop profiles and at or after the end.
    pub fn rate_at(&self, t: Duration) -> Option<f64> {
        match self {
            LoadProfile::Rate { rate, duration } => (t < *duration).then_some(*rate),
            LoadProfile::Steps { steps } => {
                let mut end = Duration::ZERO;
                for (rate, d) in steps {
                    end += *d;
                    if t < end {
                        return Some(*rate);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Open-loop profiles: the mean target rate over the whole load (requests the
    /// profile asks for, divided by its duration); `None` for closed-loop profiles or a
    /// zero duration.
    pub fn mean_target_rate(&self) -> Option<f64> {
        let secs = self.duration().as_secs_f64();
        let requests = match self {
            LoadProfile::Rate { rate, duration } => rate * duration.as_secs_f64(),
            LoadProfile::Steps { steps } => steps.iter().map(|(r, d)| r * d.as_secs_f64()).sum(),
            _ => return None,
        };
        (secs > 0.0).then(|| requests / secs)
    }

    /// Checks the numbers: at least one user or request, durations above zero, rates
    /// finite and above zero, a ramp that does not go down.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: String| {
            Err(LoadError::BadProfile {
                profile: self.kind(),
                reason,
            })
        };
        match self {
            LoadProfile::Users { users, duration } => {
                if *users == 0 {
                    return bad("users must be at least 1".into());
                }
                if duration.is_zero() {
                    return bad("the duration must be above zero".into());
                }
            }
            LoadProfile::Ramp {
                from,
                to,
                over,
                hold,
            } => {
                if *to == 0 {
                    return bad("`to` must be at least 1 user".into());
                }
                if from > to {
                    return bad(format!(
                        "the ramp goes down from {from} to {to} users; only ramps up are supported"
                    ));
                }
                if (*over + *hold).is_zero() {
                    return bad("the ramp and the hold are both zero".into());
                }
            }
            LoadProfile::Rate { rate, duration } => {
                if !(rate.is_finite() && *rate > 0.0) {
                    return bad(format!("the rate {rate} is not a number above zero"));
                }
                if duration.is_zero() {
                    return bad("the duration must be above zero".into());
                }
            }
            LoadProfile::Steps { steps } => {
                if steps.is_empty() {
                    return bad("there are no steps".into());
                }
                for (i, (rate, d)) in steps.iter().enumerate() {
                    if !(rate.is_finite() && *rate > 0.0) {
                        return bad(format!("step {i}'s rate {rate} is not a number above zero"));
                    }
                    if d.is_zero() {
                        return bad(format!("step {i}'s duration is zero"));
                    }
                }
            }
            LoadProfile::Simultaneous { requests } => {
                if *requests == 0 {
                    return bad("requests must be at least 1".into());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::secs;
    use super::*;

    #[test]
    fn seed_003_ramp_goes_linearly_from_1_to_100_then_holds() {
        let p = LoadProfile::Ramp {
            from: 1,
            to: 100,
            over: secs(720),
            hold: secs(80),
        };
        assert_eq!(p.duration(), secs(800));
        assert_eq!(p.users_at(secs(0)), Some(1.0));
        assert_eq!(p.users_at(secs(360)), Some(50.5));
        assert_eq!(p.users_at(secs(720)), Some(100.0));
        assert_eq!(p.users_at(secs(800)), Some(100.0));
        assert_eq!(p.users_at(secs(801)), None);
        assert_eq!(p.rate_at(secs(10)), None);
        assert!(!p.is_open_loop());
        p.validate().unwrap();
    }

    #[test]
    fn steps_give_the_rate_of_the_current_step() {
        let p = LoadProfile::Steps {
            steps: vec![(10.0, secs(2)), (30.0, secs(2))],
        };
        assert_eq!(p.duration(), secs(4));
        assert_eq!(p.rate_at(secs(0)), Some(10.0));
        assert_eq!(p.rate_at(Duration::from_millis(1999)), Some(10.0));
        assert_eq!(p.rate_at(secs(2)), Some(30.0));
        assert_eq!(p.rate_at(secs(4)), None);
        assert_eq!(p.mean_target_rate(), Some(20.0));
        assert_eq!(p.users_at(secs(1)), None);
        assert!(p.is_open_loop());
    }

    #[test]
    fn bad_numbers_are_refused_with_the_profile_named() {
        let down = LoadProfile::Ramp {
            from: 10,
            to: 5,
            over: secs(1),
            hold: secs(1),
        };
        let e = down.validate().unwrap_err().to_string();
        assert!(e.contains("ramp") && e.contains("goes down"), "{e}");
        let nan = LoadProfile::Rate {
            rate: f64::NAN,
            duration: secs(1),
        };
        assert!(nan.validate().unwrap_err().to_string().contains("rate"));
        assert!(LoadProfile::Steps { steps: vec![] }.validate().is_err());
        assert!(LoadProfile::Users {
            users: 0,
            duration: secs(1)
        }
        .validate()
        .is_err());
        assert!(LoadProfile::Simultaneous { requests: 0 }
            .validate()
            .is_err());
    }
}
