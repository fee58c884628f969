//! `isolab list`: stored experiments, or the built-in workloads, shapes and platforms.

use std::path::Path;
use std::time::UNIX_EPOCH;

use anyhow::Result;
use isolab_report::table::Table;

use super::Exit;
use crate::cli::ListArgs;
use crate::host;

/// The built-in workloads: what each measures, its tools and the packages it brings
/// into the image, its amount of fixed work and assets, and its metrics with units
/// and directions (the primary one marked).
fn list_workloads(json: bool) -> Result<Exit> {
    let catalog = isolab_workloads::catalog();
    if json {
        let v: Vec<serde_json::Value> = catalog
            .iter()
            .map(|w| {
                let mut v = serde_json::to_value(w)?;
                v["metrics"] = serde_json::to_value(isolab_workloads::declared_metrics(&w.name))?;
                Ok(v)
            })
            .collect::<Result<_, serde_json::Error>>()?;
        println!("{}", super::json::document("workloads", &v)?);
        return Ok(Exit::Success);
    }
    for w in catalog {
        println!("{}: {}", w.name, w.description);
        let mut facts = vec![
            format!("tools {}", w.tools.join(", ")),
            format!("packages {}", w.packages.join(", ")),
        ];
        if let Some(work) = &w.work {
            facts.push(format!(
                "work {} {} (`work = N` changes it)",
                work.amount, work.unit
            ));
        }
        if w.uses_disk {
            facts.push("on disk".into());
        }
        if let Some(stack) = &w.stack {
            let names: Vec<&str> = stack.components.iter().map(|c| c.name.as_str()).collect();
            facts.push(format!(
                "service {} ({})",
                names.join(", "),
                match stack.measure {
                    isolab_workloads::Measure::Client => "client on the host",
                    isolab_workloads::Measure::Command => "client in the platform",
                    isolab_workloads::Measure::Load(_) => "load generator on the host",
                }
            ));
        }
        println!("  {}", facts.join("; "));
        for a in &w.assets {
            let stand_in = a
                .stand_in
                .as_deref()
                .map(|s| format!(" [stand-in: {s}]"))
                .unwrap_or_default();
            println!("  asset {}: {}{stand_in}", a.name, a.description);
        }
        let metrics: Vec<String> = isolab_workloads::declared_metrics(&w.name)
            .into_iter()
            .map(|m| {
                let dir = match m.direction {
                    isolab_stats::Direction::Lower => "lower",
                    isolab_stats::Direction::Higher => "higher",
                };
                let primary = if m.name == w.primary { ", primary" } else { "" };
                format!("{} ({}, {dir} is better{primary})", m.name, m.unit)
            })
            .collect();
        println!("  metrics: {}", metrics.join(", "));
    }
    Ok(Exit::Success)
}

pub fn list(db: &Path, args: ListArgs) -> Result<Exit> {
    if args.workloads {
        return list_workloads(args.json);
    }
    if args.platforms {
        return list_platforms(args.json);
    }
    if args.stacks {
        return list_stacks(args.json);
    }
    if args.shapes {
        let cpus = host::facts()?.cpus.len() as u32;
        let shapes = isolab_lab::shape::builtin_shapes(cpus);
        if args.json {
            println!("{}", super::json::document("shapes", &shapes)?);
        } else {
            let mut t = Table::new(
                vec!["shape".into(), "cpus".into(), "memory".into()],
                vec![false, true, true],
            );
            for s in shapes {
                t.push(vec![
                    s.name.clone(),
                    s.cpus().to_string(),
                    s.memory.map_or("-".into(), |m| m.to_string()),
                ]);
            }
            print!("{}", t.render(super::color()));
        }
        return Ok(Exit::Success);
    }
    let store = host::existing_store(db)?;
    let experiments = store.experiments()?;
    if args.json {
        let v: Vec<serde_json::Value> = experiments
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.id, "name": e.name, "status": e.status.as_str(),
                    "created_unix_ms": e.created_at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
                    "cells": e.cells, "runs": e.runs,
                })
            })
            .collect();
        println!("{}", super::json::document("experiments", &v)?);
        return Ok(Exit::Success);
    }
    let mut t = Table::new(
        vec![
            "id".into(),
            "name".into(),
            "status".into(),
            "created (UTC)".into(),
            "cells".into(),
            "runs".into(),
        ],
        vec![true, false, false, false, true, true],
    );
    for e in experiments {
        t.push(vec![
            e.id.to_string(),
            e.name,
            e.status.as_str().into(),
            humantime::format_rfc3339_seconds(e.created_at).to_string(),
            e.cells.to_string(),
            e.runs.to_string(),
        ]);
    }
    print!("{}", t.render(super::color()));
    Ok(Exit::Success)
}

/// `isolab list --platforms`: the registry, with each platform's capabilities and
/// whether this host can run it (checked without starting anything).
fn list_platforms(json: bool) -> Result<Exit> {
    let platforms = isolab_lab::platform::availability();
    if json {
        let v: Vec<serde_json::Value> = platforms
            .iter()
            .map(|(p, usable)| {
                let c = &p.capabilities;
                serde_json::json!({
                    "engine": p.kind,
                    "summary": p.summary,
                    "networks": c.networks,
                    "default_network": c.default_network(),
                    "limits": c.limits.names(),
                    "storage": c.storage,
                    "perf_follows_workload": c.perf_follows_workload,
                    "needs_image": c.needs_image,
                    "services": c.services,
                    "vm": c.vm,
                    "usable": usable.usable,
                    "detail": usable.detail,
                })
            })
            .collect();
        println!("{}", super::json::document("platforms", &v)?);
        return Ok(Exit::Success);
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let mut t = Table::new(
        vec![
            "engine".into(),
            "networks".into(),
            "limits".into(),
            "storage".into(),
            "perf".into(),
            "image".into(),
            "services".into(),
            "usable here".into(),
        ],
        vec![false; 8],
    );
    for (p, usable) in &platforms {
        let c = &p.capabilities;
        let networks: Vec<&str> = c.networks.iter().map(|n| n.as_str()).collect();
        t.push(vec![
            p.kind.to_string(),
            networks.join(","),
            c.limits.names().join(","),
            c.storage
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
            yes_no(c.perf_follows_workload),
            yes_no(c.needs_image),
            yes_no(c.services),
            yes_no(usable.usable),
        ]);
    }
    print!("{}", t.render(super::color()));
    println!();
    let width = platforms
        .iter()
        .map(|(p, _)| p.kind.as_str().len())
        .max()
        .unwrap_or(10);
    for (p, usable) in &platforms {
        let (name, detail) = (p.kind.as_str(), &usable.detail);
        if usable.usable {
            println!("{name:width$} {} ({detail})", p.summary);
        } else {
            println!("{name:width$} {}; not usable: {detail}", p.summary);
        }
    }
    println!();
    println!("The first network is each engine's default. VM engines are named with their accelerator in a spec: vm(kvm), vm(tcg), vm(tcg)+isolab, …; built-in bridge levels: ENGINE-bridge.");
    Ok(Exit::Success)
}

/// The built-in stacks and the load generators.
fn list_stacks(json: bool) -> Result<Exit> {
    use isolab_workloads::load::{Generator, LoadProfile};
    use std::time::Duration;
    let stacks = isolab_workloads::stacks::stacks();
    let second = Duration::from_secs(1);
    let profiles = [
        LoadProfile::Users {
            users: 1,
            duration: second,
        },
        LoadProfile::Ramp {
            from: 1,
            to: 2,
            over: second,
            hold: second,
        },
        LoadProfile::Rate {
            rate: 1.0,
            duration: second,
        },
        LoadProfile::Steps {
            steps: vec![(1.0, second)],
        },
        LoadProfile::Simultaneous { requests: 1 },
    ];
    let generators: Vec<(Generator, Vec<&str>, bool)> = Generator::ALL
        .iter()
        .map(|g| {
            let drives = profiles
                .iter()
                .filter(|p| g.supports(p).is_ok())
                .map(|p| p.kind())
                .collect();
            let installed = isolab_lab::runner::generator_missing(*g).is_empty();
            (*g, drives, installed)
        })
        .collect();
    if json {
        let v = serde_json::json!({
            "stacks": stacks.iter().map(|s| serde_json::json!({
                "name": s.name,
                "description": s.description,
                "components": s.components.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
                "packages": s.packages,
            })).collect::<Vec<_>>(),
            "generators": generators.iter().map(|(g, drives, installed)| serde_json::json!({
                "name": g.as_str(), "profiles": drives, "installed": installed,
                "install": g.install_hint(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", super::json::document("stacks", &v)?);
        return Ok(Exit::Success);
    }
    let mut t = Table::new(
        vec![
            "stack".into(),
            "components".into(),
            "packages".into(),
            "description".into(),
        ],
        vec![false; 4],
    );
    for s in &stacks {
        t.push(vec![
            s.name.into(),
            s.components
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            s.packages.join(" "),
            s.description.into(),
        ]);
    }
    print!("{}", t.render(super::color()));
    println!();
    let mut t = Table::new(
        vec!["generator".into(), "profiles".into(), "installed".into()],
        vec![false; 3],
    );
    for (g, drives, installed) in &generators {
        t.push(vec![
            g.as_str().into(),
            drives.join(", "),
            if *installed {
                "yes".into()
            } else {
                format!("no: {}", g.install_hint())
            },
        ]);
    }
    print!("{}", t.render(super::color()));
    println!("\nA spec takes a stack with `stack = \"NAME\"` in a [workload.NAME] table; docs/services.md describes stacks, loads and profiles.");
    Ok(Exit::Success)
}
