//! `[workload.NAME.load]`: the load generator that measures a service stack, its requests,
//! per-request timeout and load profile (users, a ramp, a rate, rate steps or
//! simultaneous requests).

use std::time::Duration;

use isolab_workloads::load::{Generator, LoadProfile, LoadSpec, Request};
use isolab_workloads::LoadDef;
use toml::Spanned;

use super::DEFAULT_REQUEST_TIMEOUT;
use crate::spec::raw::{RawLoad, RawProfile, RawRequest};
use crate::spec::validator::Validator;

/// What a profile may be, for errors.
const PROFILE_USAGE: &str = "a profile is one of { users = N, duration = \"60s\" }, { ramp = [1, 100], over = \"720s\", hold = \"80s\" }, { rate = 500, duration = \"30s\" }, { steps = [[100, \"10s\"], [200, \"10s\"]] } or { simultaneous = N }";

impl Validator<'_> {
    pub(super) fn load(&mut self, raw: Spanned<RawLoad>) -> Option<LoadDef> {
        let raw = raw.into_inner();
        let before = self.errors.len();
        let generator = match raw.generator.get_ref().parse::<Generator>() {
            Ok(g) => Some(g),
            Err(_) => {
                let known: Vec<&str> = Generator::ALL.iter().map(|g| g.as_str()).collect();
                self.err(
                    raw.generator.span(),
                    format!(
                        "unknown load generator `{}`: expected one of {}",
                        raw.generator.get_ref(),
                        known.join(", ")
                    ),
                );
                None
            }
        };
        let profile_span = raw.profile.span();
        let profile = self.profile(raw.profile);
        let requests = self.requests(raw.requests);
        let timeout = raw
            .timeout
            .map(|t| self.duration(&t, "timeout", Duration::from_millis(1)))
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        let (generator, profile) = (generator?, profile?);
        if let Err(e) = generator.supports(&profile) {
            self.err(profile_span, e.to_string());
        }
        (self.errors.len() == before).then(|| LoadDef {
            target: raw.target.into_inner(),
            spec: LoadSpec {
                generator,
                requests,
                profile,
                timeout,
            },
        })
    }

    /// `requests`: each named with letters, digits, `-` or `_`, with a path from `/`;
    /// `GET /` as `home` unless given.
    fn requests(&mut self, raw: Vec<Spanned<RawRequest>>) -> Vec<Request> {
        if raw.is_empty() {
            return vec![Request {
                name: "home".into(),
                method: "GET".into(),
                path: "/".into(),
            }];
        }
        raw.into_iter()
            .filter_map(|r| {
                let at = r.span();
                let r = r.into_inner();
                let ok = !r.name.is_empty()
                    && r.name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && r.path.starts_with('/');
                if !ok {
                    self.err(at, "a request needs a name of letters, digits, `-` or `_`, and a path starting with `/`");
                    return None;
                }
                Some(Request {
                    name: r.name,
                    method: r.method.unwrap_or_else(|| "GET".into()),
                    path: r.path,
                })
            })
            .collect()
    }

    fn profile(&mut self, raw: Spanned<RawProfile>) -> Option<LoadProfile> {
        let at = raw.span();
        let p = raw.into_inner();
        let kinds = [
            p.users.is_some(),
            p.ramp.is_some(),
            p.rate.is_some(),
            p.steps.is_some(),
            p.simultaneous.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            self.err(at, PROFILE_USAGE);
            return None;
        }
        match profile(&p) {
            Ok(p) => Some(p),
            Err(message) => {
                self.err(at, message);
                None
            }
        }
    }
}

/// The profile of `p`, which has exactly one kind, or what is wrong with it.
fn profile(p: &RawProfile) -> Result<LoadProfile, String> {
    if let Some(n) = p.users {
        stray(p, &["duration"])?;
        return Ok(LoadProfile::Users {
            users: count(n, "users")?,
            duration: dur(&p.duration, "duration")?,
        });
    }
    if let Some(r) = &p.ramp {
        return ramp(p, r);
    }
    if let Some(r) = p.rate {
        stray(p, &["duration"])?;
        return Ok(LoadProfile::Rate {
            rate: rate(r)?,
            duration: dur(&p.duration, "duration")?,
        });
    }
    if let Some(steps) = &p.steps {
        stray(p, &[])?;
        if steps.is_empty() {
            return Err("steps needs at least one [rate, \"duration\"]".into());
        }
        let steps = steps
            .iter()
            .map(|(r, d)| Ok((rate(*r)?, dur(&Some(d.clone()), "step duration")?)))
            .collect::<Result<Vec<_>, String>>()?;
        return Ok(LoadProfile::Steps { steps });
    }
    stray(p, &[])?;
    Ok(LoadProfile::Simultaneous {
        requests: count(p.simultaneous.unwrap_or(0), "simultaneous")?,
    })
}

/// `ramp = [from, to]` users `over` a duration, then an optional `hold`.
fn ramp(p: &RawProfile, r: &[i64]) -> Result<LoadProfile, String> {
    stray(p, &["over", "hold"])?;
    let [from, to] = r[..] else {
        return Err("ramp is [from, to] users, e.g. [1, 100]".into());
    };
    let (from, to) = (
        count(from, "ramp's first user count")?,
        count(to, "ramp's last user count")?,
    );
    if to < from {
        return Err(format!(
            "ramp [{from}, {to}] goes down: write [from, to] with from ≤ to"
        ));
    }
    let hold = match &p.hold {
        None => Duration::ZERO,
        Some(_) => dur(&p.hold, "hold")?,
    };
    Ok(LoadProfile::Ramp {
        from,
        to,
        over: dur(&p.over, "over")?,
        hold,
    })
}

/// A profile's duration `what`: given, and positive.
fn dur(v: &Option<String>, what: &str) -> Result<Duration, String> {
    let v = v
        .as_deref()
        .ok_or_else(|| format!("this profile needs `{what}`; {PROFILE_USAGE}"))?;
    humantime::parse_duration(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!("invalid {what} `{v}`: expected a positive duration such as \"80s\" or \"12m\"")
        })
}

/// A profile's count `what`: a whole number ≥ 1.
fn count(n: i64, what: &str) -> Result<u32, String> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{what} must be a whole number ≥ 1, not {n}"))
}

/// An error for the first of `duration`, `over` and `hold` that `p` gives but its kind
/// does not take (`allowed`).
fn stray(p: &RawProfile, allowed: &[&str]) -> Result<(), String> {
    let given = [
        ("duration", p.duration.is_some()),
        ("over", p.over.is_some()),
        ("hold", p.hold.is_some()),
    ];
    match given.iter().find(|(k, g)| *g && !allowed.contains(k)) {
        Some((k, _)) => Err(format!(
            "`{k}` does not belong to this profile; {PROFILE_USAGE}"
        )),
        None => Ok(()),
    }
}

/// A rate of requests per second: finite and positive.
fn rate(r: f64) -> Result<f64, String> {
    (r.is_finite() && r > 0.0)
        .then_some(r)
        .ok_or_else(|| format!("a rate must be a positive number of requests per second, not {r}"))
}

#[cfg(test)]
mod tests {
    use crate::spec::tests::{errors, parse};
    use isolab_workloads::load::{Generator, LoadProfile};
    use isolab_workloads::Measure;
    use std::time::Duration;

    const PAGE: &str = "[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"page\"]\n[workload.page]\nstack = \"static\"\n[workload.page.load]\ngenerator = \"vegeta\"\ntarget = \"web\"\n";

    #[test]
    fn a_load_table_sets_requests_steps_and_timeout() {
        let spec = parse(&format!("{PAGE}requests = [{{ name = \"page\", path = \"/index.html\", method = \"HEAD\" }}]\nprofile = {{ steps = [[100, \"10s\"], [200, \"5s\"]] }}\ntimeout = \"2s\"\n")).unwrap();
        let Measure::Load(load) = &spec.cells[0].workload.stack.as_ref().unwrap().measure else {
            panic!("not measured by a load")
        };
        assert_eq!(load.spec.generator, Generator::Vegeta);
        assert_eq!(load.spec.requests[0].method, "HEAD");
        assert_eq!(
            load.spec.profile,
            LoadProfile::Steps {
                steps: vec![
                    (100.0, Duration::from_secs(10)),
                    (200.0, Duration::from_secs(5))
                ]
            }
        );
        assert_eq!(load.spec.timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_requests_and_empty_steps_point_at_the_value() {
        let errs = errors(&format!("{PAGE}requests = [{{ name = \"a page\", path = \"index.html\" }}]\nprofile = {{ steps = [] }}\n"));
        assert_eq!(
            errs,
            [
                "exp.toml:10:13: a request needs a name of letters, digits, `-` or `_`, and a path starting with `/`",
                "exp.toml:11:11: steps needs at least one [rate, \"duration\"]",
            ]
        );
    }
}
