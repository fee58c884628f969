//! The error rates of isolab's verdict rule, by seeded simulation: the table the
//! README's statistics section quotes.
//!
//! `cargo run --release -p isolab-stats --example verdict_rates`

use isolab_stats::{runs_for_verdict, simulate_verdicts, Design, Noise, VerdictRule};

fn main() {
    let rule = VerdictRule::default();
    let experiments = 4000;
    println!("rule: worse/better when q < {} and the estimate beyond ±{:.0}%; ≈ when the {:.0}% CI lies within ±{:.0}%", rule.alpha, rule.noise * 100.0, rule.equivalence_level() * 100.0, rule.noise * 100.0);
    println!("{experiments} simulated experiments per row, seed 1; paired by round unless said");
    println!();
    println!(
        "{:<10} {:>5} {:>7} {:>5} {:>11} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "noise", "CV", "effect", "n", "stopping", "worse", "better", "≈", "?", "mean runs"
    );
    let row = |noise: Noise, cv: f64, effect: f64, n: u32, paired: bool, sequential: bool| {
        let d = Design {
            cv,
            effect,
            n,
            paired,
            noise,
            drift: 0.0,
            sequential_from: sequential.then_some(6),
        };
        let r = simulate_verdicts(&d, &rule, experiments, 1);
        println!(
            "{:<10} {:>4.1}% {:>6.1}% {:>5} {:>11} {:>7.1}% {:>7.1}% {:>7.1}% {:>7.1}% {:>9.1}",
            format!("{noise:?}{}", if paired { "" } else { " (U)" }),
            cv * 100.0,
            effect * 100.0,
            n,
            if sequential { "sequential" } else { "fixed-N" },
            r.worse * 100.0,
            r.better * 100.0,
            r.equivalent * 100.0,
            r.inconclusive * 100.0,
            r.mean_runs
        );
    };
    for noise in [Noise::Normal, Noise::LogNormal] {
        for cv in [0.01, 0.025, 0.05, 0.15] {
            row(noise, cv, 0.0, 20, true, false);
        }
        row(noise, 0.025, 0.0, 30, true, true);
        row(noise, 0.15, 0.0, 30, true, true);
        let n = runs_for_verdict(0.025, 0.03, &rule, 0.9);
        row(noise, 0.025, 0.03, n, true, false);
        row(noise, 0.025, 0.03, n, false, false);
        row(noise, 0.025, 0.03, n + 2, true, false);
        row(noise, 0.025, 0.03, 30, true, true);
        row(noise, 0.025, 0.03, 12, true, false);
        row(noise, 0.05, 6.0, 30, true, true);
    }
    println!();
    println!(
        "runs recommended for a 3% effect at 90% power: CV 1% → {}, 2.5% → {}, 5% → {}",
        runs_for_verdict(0.01, 0.03, &rule, 0.9),
        runs_for_verdict(0.025, 0.03, &rule, 0.9),
        runs_for_verdict(0.05, 0.03, &rule, 0.9)
    );
}
