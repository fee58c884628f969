//! An OCI `linux.seccomp` section (what Docker, Podman and other engines write in
//! `config.json`) compiled with libseccomp, with runc's semantics:
//!
//! - `defaultAction` and each rule's `action`: `SCMP_ACT_ALLOW`, `ERRNO` (`errnoRet`, or
//!   `defaultErrnoRet` for the default action; `EPERM` when absent), `KILL` / `KILL_THREAD`,
//!   `KILL_PROCESS`, `TRAP`, `TRACE` (the same return-value fields; `EPERM` when absent),
//!   `LOG`. A rule whose action equals the default action is skipped (libseccomp refuses it,
//!   and it changes nothing).
//! - `architectures`: each is added to the filter; the native one is always kept (as runc and
//!   crun do), and a call from any other architecture kills the process. Names are resolved
//!   for the native architecture by libseccomp, which adds a rule only on the architectures
//!   that have the call (`chown32` only on x86, `socket` as `socketcall` on x86 too); a name
//!   libseccomp does not know at all is skipped, as runc does (a profile may list calls newer
//!   than the system's libseccomp).
//! - `args`: `SCMP_CMP_NE`, `LT`, `LE`, `EQ`, `GE`, `GT` compare `value` with the whole
//!   argument; `SCMP_CMP_MASKED_EQ` checks `(arg & value) == valueTwo` (`valueTwo` absent:
//!   0). The checks of one rule must all hold; when a rule checks the same argument twice,
//!   which libseccomp cannot express in one rule, each check becomes a rule of its own (as
//!   runc does).
//! - `flags`: `SECCOMP_FILTER_FLAG_TSYNC` (with `TSYNC_ESRCH`), `LOG` and `SPEC_ALLOW` are
//!   passed to `seccomp(2)` when the filter is installed.
//!
//! Refused, with an error naming the field: `listenerPath`, `SCMP_ACT_NOTIFY` and
//! `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (seccomp notification needs an agent isolab does
//! not run), an argument index above 5 and an errno above 65535; libseccomp's own refusals
//! (an architecture the system's libseccomp does not support) name the step. When two
//! unconditional rules give one call different actions, libseccomp keeps the first, as under
//! runc and crun. Unknown action, operator, architecture or flag
//! names do not parse as [`LinuxSeccomp`] in the first place (the bundle's `config.json`
//! is refused with serde's message naming the value).

use libseccomp::{ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp};
use oci_spec::runtime::{
    Arch as OciArch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompFilterFlag,
    LinuxSeccompOperator,
};

use super::bpf::{self, CompiledFilter};
use crate::security::error::SecurityError;

const WHAT: &str = "the OCI seccomp profile";

/// Compiles an OCI `linux.seccomp` section for the architectures it lists (and the native
/// one).
pub fn compile(profile: &LinuxSeccomp) -> Result<CompiledFilter, SecurityError> {
    if let Some(path) = profile.listener_path() {
        return Err(refused(
            "listenerPath",
            path.display(),
            "seccomp notification (SCMP_ACT_NOTIFY through a listener socket) is not \
             supported by isolab-runtime: remove listenerPath and the SCMP_ACT_NOTIFY rules",
        ));
    }
    let default = action(
        ("defaultAction", "defaultErrnoRet"),
        profile.default_action(),
        profile.default_errno_ret(),
    )?;
    let flags = filter_flags(profile.flags().as_deref().unwrap_or_default())?;
    let mut arches = vec![ScmpArch::native()];
    for &arch in profile.architectures().iter().flatten() {
        let arch = scmp_arch(arch);
        if !arches.contains(&arch) {
            arches.push(arch);
        }
    }
    let mut filter = bpf::FilterBuilder::new(WHAT, default, &arches)?;
    for (i, rule) in profile.syscalls().iter().flatten().enumerate() {
        let field = format!("syscalls[{i}]");
        let act = action(
            (&format!("{field}.action"), &format!("{field}.errnoRet")),
            rule.action(),
            rule.errno_ret(),
        )?;
        if act == default {
            continue;
        }
        let args = rule.args().as_deref().unwrap_or_default();
        let checks = args
            .iter()
            .enumerate()
            .map(|(j, a)| arg_compare(&format!("{field}.args[{j}]"), a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut indexes: Vec<usize> = args.iter().map(|a| a.index()).collect();
        indexes.sort_unstable();
        indexes.dedup();
        // libseccomp refuses two checks of one argument in a rule: one rule per check then.
        let groups: Vec<&[ScmpArgCompare]> = if indexes.len() == args.len() {
            vec![&checks]
        } else {
            checks.chunks(1).collect()
        };
        for name in rule.names() {
            let Some(syscall) = bpf::resolve(name) else {
                continue;
            };
            for group in &groups {
                filter.add(act, syscall, group, || {
                    format!(
                        "{field} ({name}, {:?}, {} argument checks)",
                        act,
                        group.len()
                    )
                })?;
            }
        }
    }
    Ok(CompiledFilter {
        program: filter.export()?,
        flags,
    })
}

fn refused(
    field: impl Into<String>,
    value: impl std::fmt::Display,
    reason: &'static str,
) -> SecurityError {
    SecurityError::OciSeccomp {
        field: field.into(),
        value: value.to_string(),
        reason,
    }
}

/// The libseccomp action of an OCI action; `ret` is its `errnoRet` (or `defaultErrnoRet`);
/// `fields` name both in errors.
fn action(
    (field, ret_field): (&str, &str),
    action: LinuxSeccompAction,
    ret: Option<u32>,
) -> Result<ScmpAction, SecurityError> {
    let ret = || -> Result<u16, SecurityError> {
        match ret {
            None => Ok(libc::EPERM as u16),
            Some(v) => u16::try_from(v).map_err(|_| {
                refused(
                    ret_field,
                    v,
                    "the kernel passes at most 16 bits of return value: use an errno below 4096",
                )
            }),
        }
    };
    Ok(match action {
        LinuxSeccompAction::ScmpActAllow => ScmpAction::Allow,
        LinuxSeccompAction::ScmpActErrno => ScmpAction::Errno(i32::from(ret()?)),
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => {
            ScmpAction::KillThread
        }
        LinuxSeccompAction::ScmpActKillProcess => ScmpAction::KillProcess,
        LinuxSeccompAction::ScmpActTrap => ScmpAction::Trap,
        LinuxSeccompAction::ScmpActTrace => ScmpAction::Trace(ret()?),
        LinuxSeccompAction::ScmpActLog => ScmpAction::Log,
        LinuxSeccompAction::ScmpActNotify => {
            return Err(refused(
                field,
                "SCMP_ACT_NOTIFY",
                "seccomp notification needs a listener agent, which isolab-runtime does not \
                 support: use SCMP_ACT_ERRNO or SCMP_ACT_TRACE instead",
            ))
        }
    })
}

/// The libseccomp comparison of one OCI argument check.
fn arg_compare(field: &str, arg: &LinuxSeccompArg) -> Result<ScmpArgCompare, SecurityError> {
    let index = u32::try_from(arg.index())
        .ok()
        .filter(|&i| i < 6)
        .ok_or_else(|| {
            refused(
                format!("{field}.index"),
                arg.index(),
                "a syscall has arguments 0 to 5",
            )
        })?;
    let (op, datum) = match arg.op() {
        LinuxSeccompOperator::ScmpCmpNe => (ScmpCompareOp::NotEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpLt => (ScmpCompareOp::Less, arg.value()),
        LinuxSeccompOperator::ScmpCmpLe => (ScmpCompareOp::LessOrEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpEq => (ScmpCompareOp::Equal, arg.value()),
        LinuxSeccompOperator::ScmpCmpGe => (ScmpCompareOp::GreaterEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpGt => (ScmpCompareOp::Greater, arg.value()),
        // (arg & value) == valueTwo.
        LinuxSeccompOperator::ScmpCmpMaskedEq => (
            ScmpCompareOp::MaskedEqual(arg.value()),
            arg.value_two().unwrap_or(0),
        ),
    };
    Ok(ScmpArgCompare::new(index, op, datum))
}

/// `SECCOMP_FILTER_FLAG_*` bits of the OCI flags.
fn filter_flags(flags: &[LinuxSeccompFilterFlag]) -> Result<u32, SecurityError> {
    let mut bits = 0;
    for (i, flag) in flags.iter().enumerate() {
        bits |= match flag {
            LinuxSeccompFilterFlag::SeccompFilterFlagTsync => {
                bpf::FLAG_TSYNC | bpf::FLAG_TSYNC_ESRCH
            }
            LinuxSeccompFilterFlag::SeccompFilterFlagLog => bpf::FLAG_LOG,
            LinuxSeccompFilterFlag::SeccompFilterFlagSpecAllow => bpf::FLAG_SPEC_ALLOW,
            LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv => {
                return Err(refused(
                    format!("flags[{i}]"),
                    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
                    "the flag only applies to a seccomp notification listener, which \
                     isolab-runtime does not support: remove it",
                ))
            }
        };
    }
    Ok(bits)
}

/// libseccomp's architecture for an OCI one (the system's libseccomp may still refuse a recent
/// one, such as LoongArch in 2.5).
fn scmp_arch(arch: OciArch) -> ScmpArch {
    match arch {
        OciArch::ScmpArchNative => ScmpArch::native(),
        OciArch::ScmpArchX86 => ScmpArch::X86,
        OciArch::ScmpArchX86_64 => ScmpArch::X8664,
        OciArch::ScmpArchX32 => ScmpArch::X32,
        OciArch::ScmpArchArm => ScmpArch::Arm,
        OciArch::ScmpArchAarch64 => ScmpArch::Aarch64,
        OciArch::ScmpArchMips => ScmpArch::Mips,
        OciArch::ScmpArchMips64 => ScmpArch::Mips64,
        OciArch::ScmpArchMips64n32 => ScmpArch::Mips64N32,
        OciArch::ScmpArchMipsel => ScmpArch::Mipsel,
        OciArch::ScmpArchMipsel64 => ScmpArch::Mipsel64,
        OciArch::ScmpArchMipsel64n32 => ScmpArch::Mipsel64N32,
        OciArch::ScmpArchPpc => ScmpArch::Ppc,
        OciArch::ScmpArchPpc64 => ScmpArch::Ppc64,
        OciArch::ScmpArchPpc64le => ScmpArch::Ppc64Le,
        OciArch::ScmpArchS390 => ScmpArch::S390,
        OciArch::ScmpArchS390x => ScmpArch::S390X,
        OciArch::ScmpArchParisc => ScmpArch::Parisc,
        OciArch::ScmpArchParisc64 => ScmpArch::Parisc64,
        OciArch::ScmpArchRiscv64 => ScmpArch::Riscv64,
        OciArch::ScmpArchLoongarch64 => ScmpArch::Loongarch64,
        OciArch::ScmpArchM68k => ScmpArch::M68k,
        OciArch::ScmpArchSh => ScmpArch::Sh,
        OciArch::ScmpArchSheb => ScmpArch::Sheb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKER: &str = include_str!("fixtures/docker-20.10.24.json");
    const PODMAN: &str = include_str!("fixtures/podman-4.3.1.json");

    fn parse(json: &str) -> LinuxSeccomp {
        serde_json::from_str(json).unwrap()
    }

    fn with(json: serde_json::Value) -> Result<CompiledFilter, SecurityError> {
        compile(&serde_json::from_value(json).unwrap())
    }

    #[test]
    fn engine_profiles_compile() {
        for (name, json) in [("docker", DOCKER), ("podman", PODMAN)] {
            let filter = compile(&parse(json)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(filter.flags, 0, "{name}");
            // Three architectures: several hundred instructions, within the kernel's limit.
            assert!(
                filter.program.len() > 300 && filter.program.len() < bpf::BPF_MAXINSNS,
                "{name}: {}",
                filter.program.len()
            );
        }
    }

    #[test]
    fn docker_default_as_oci_compiles_like_the_builtin_one() {
        let cfg = crate::security::SecurityConfig::default();
        let oci = compile(&cfg.oci_seccomp_spec().unwrap().unwrap()).unwrap();
        let builtin = crate::security::ResolvedProfile::docker_default(
            cfg.capabilities,
            crate::security::Arch::native().unwrap(),
        )
        .compile()
        .unwrap();
        // Same rules; the built-in one compares int arguments on 32 bits (masked), so the
        // programs are close in size but not equal.
        let (a, b) = (oci.program.len() as f64, builtin[0].len() as f64);
        assert!((a / b - 1.0).abs() < 0.1, "{a} vs {b}");
    }

    #[test]
    fn every_action_operator_and_flag_compiles() {
        for action in [
            "SCMP_ACT_ALLOW",
            "SCMP_ACT_ERRNO",
            "SCMP_ACT_KILL",
            "SCMP_ACT_KILL_THREAD",
            "SCMP_ACT_KILL_PROCESS",
            "SCMP_ACT_TRAP",
            "SCMP_ACT_TRACE",
            "SCMP_ACT_LOG",
        ] {
            let rule_action = if action == "SCMP_ACT_ALLOW" {
                "SCMP_ACT_ERRNO"
            } else {
                "SCMP_ACT_ALLOW"
            };
            // Seven checks on six arguments: argument 0 is checked twice, so the rule is
            // split into one rule per check (libseccomp refuses the pair).
            let args: Vec<_> = [
                "SCMP_CMP_NE",
                "SCMP_CMP_LT",
                "SCMP_CMP_LE",
                "SCMP_CMP_EQ",
                "SCMP_CMP_GE",
                "SCMP_CMP_GT",
                "SCMP_CMP_MASKED_EQ",
            ]
            .iter()
            .enumerate()
            .map(|(i, op)| serde_json::json!({"index": i % 6, "value": 7, "valueTwo": 3, "op": op}))
            .collect();
            let filter = with(serde_json::json!({
                "defaultAction": action,
                "defaultErrnoRet": 38,
                "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
                "flags": ["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
                          "SECCOMP_FILTER_FLAG_SPEC_ALLOW"],
                "syscalls": [
                    {"names": ["getpid", "chown32", "no_such_call"], "action": rule_action},
                    {"names": ["prctl"], "action": rule_action, "args": args},
                    {"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 3,
                     "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_GT"},
                              {"index": 1, "value": 9, "op": "SCMP_CMP_EQ"}]},
                    // The same action as the default: skipped.
                    {"names": ["getppid"], "action": action, "errnoRet": 38},
                ],
            }))
            .unwrap_or_else(|e| panic!("{action}: {e}"));
            assert_eq!(
                filter.flags,
                bpf::FLAG_TSYNC | bpf::FLAG_TSYNC_ESRCH | bpf::FLAG_LOG | bpf::FLAG_SPEC_ALLOW
            );
        }
    }

    #[test]
    fn unsupported_parts_are_refused_by_name() {
        let base = serde_json::json!({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []});
        let refuse = |patch: serde_json::Value, words: &[&str]| {
            let mut v = base.clone();
            v.as_object_mut()
                .unwrap()
                .extend(patch.as_object().unwrap().clone());
            let e = with(v).unwrap_err().to_string();
            for w in words {
                assert!(e.contains(w), "{e:?} lacks {w:?}");
            }
        };
        refuse(
            serde_json::json!({"listenerPath": "/run/agent.sock"}),
            &["listenerPath", "/run/agent.sock", "not supported"],
        );
        refuse(
            serde_json::json!({"defaultAction": "SCMP_ACT_NOTIFY"}),
            &["defaultAction", "SCMP_ACT_NOTIFY"],
        );
        refuse(
            serde_json::json!({"syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_NOTIFY"}]}),
            &["syscalls[0].action", "SCMP_ACT_NOTIFY"],
        );
        refuse(
            serde_json::json!({"flags": ["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]}),
            &["flags[0]", "WAIT_KILLABLE_RECV"],
        );
        refuse(
            serde_json::json!({"syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ALLOW",
                               "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}),
            &["syscalls[0].args[0].index", "6", "0 to 5"],
        );
        refuse(
            serde_json::json!({"syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ERRNO",
                               "errnoRet": 70000}]}),
            &["syscalls[0].errnoRet", "70000"],
        );
        refuse(
            serde_json::json!({"defaultErrnoRet": 70000}),
            &["defaultErrnoRet", "70000"],
        );
        // Two unconditional rules with different actions for one call (Podman's profile
        // has `setns` in its allowlist and in an EPERM rule): libseccomp keeps the first, as
        // under runc and crun.
        with(
            serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
            {"names": ["getpid"], "action": "SCMP_ACT_ERRNO"},
            {"names": ["getpid"], "action": "SCMP_ACT_KILL_PROCESS"}]}),
        )
        .unwrap();
    }

    #[test]
    fn unknown_names_of_actions_operators_and_arches_do_not_parse() {
        for (field, bad) in [
            ("defaultAction", "SCMP_ACT_NOPE"),
            ("op", "SCMP_CMP_ABOUT"),
            ("arch", "SCMP_ARCH_Z80"),
            ("flag", "SECCOMP_FILTER_FLAG_NOPE"),
        ] {
            let json = match field {
                "defaultAction" => serde_json::json!({"defaultAction": bad}),
                "op" => serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
                    {"names": ["getpid"], "action": "SCMP_ACT_ERRNO",
                     "args": [{"index": 0, "value": 1, "op": bad}]}]}),
                "arch" => serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
                                             "architectures": [bad]}),
                _ => serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "flags": [bad]}),
            };
            let e = serde_json::from_value::<LinuxSeccomp>(json).unwrap_err();
            assert!(e.to_string().contains(bad), "{field}: {e}");
        }
    }
}
