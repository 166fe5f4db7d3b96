//! The seccomp filters: what Landlock cannot say.
//!
//! Landlock confines paths, TCP ports, signals and abstract unix sockets. It
//! says nothing about socket families (a UDP datagram or a raw socket needs
//! no `connect`), and a confined process that is root keeps its
//! capabilities: it could load a kernel module, raise its own rlimits or
//! reconfigure the host. The filter refuses those system calls with `EPERM`
//! and lets every other one through, so ordinary programs run unchanged.

use crate::ConfineError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};
use std::collections::BTreeMap;

/// System calls refused whatever the arguments: privileged operations that
/// reach past the confined process (modules, kexec, mounts, namespaces,
/// clocks, host names, swap, keyrings, BPF, perf, the kernel log), ways
/// around the other filters (io_uring opens sockets without `socket(2)`;
/// `open_by_handle_at` opens a file without a path), and `setrlimit`, which
/// would let root raise its own limits.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_open_by_handle_at,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_userfaultfd,
    libc::SYS_fanotify_init,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_setrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// System calls refused when they name another process (argument `index`
/// is not 0, "myself"): root may renice or reschedule itself, not the host's
/// processes.
const ONLY_ON_ITSELF: &[(libc::c_long, u8)] = &[
    (libc::SYS_setpriority, 1),
    (libc::SYS_ioprio_set, 1),
    (libc::SYS_sched_setscheduler, 0),
    (libc::SYS_sched_setparam, 0),
    (libc::SYS_sched_setattr, 0),
    (libc::SYS_sched_setaffinity, 0),
];

/// Terminal ioctls that inject input into, or control, a terminal the
/// process may still hold an inherited descriptor to (root passes the
/// kernel's own TIOCSTI check).
const REFUSED_IOCTLS: &[u32] = &[libc::TIOCSTI as u32, libc::TIOCLINUX as u32];

/// The socket families a process without network may open: unix sockets
/// only (pipes between processes, local daemons it was granted by path).
const LOCAL_FAMILIES: &[libc::c_int] = &[libc::AF_UNIX];

/// The families a process with network may open: unix, IPv4, IPv6 and
/// netlink (which name resolution uses). Packet, vsock (a way to the
/// hypervisor) and the rest stay closed.
const NETWORK_FAMILIES: &[libc::c_int] = &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// The namespace flags of `clone(2)`: a process that made a new user
/// namespace would hold every capability inside it, and new namespaces of
/// any kind are not the confinement's to hand out.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The mode bits that make an executable run as its owner or group: a
/// file root makes in a read-write grant must not become a way to root for
/// whoever can run it outside.
const SET_ID_BITS: &[u64] = &[libc::S_ISUID as u64, libc::S_ISGID as u64];

/// `(system call, index of its mode argument)` of the calls that set a
/// file's mode outright, or make a file with it.
const MODE_SETTERS: &[(libc::c_long, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    // creat(path, mode) always creates.
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// `(system call, index of its flags, index of its mode)` of the calls
/// that give a mode when `O_CREAT` or `O_TMPFILE` makes a file.
const CREATORS: &[(libc::c_long, u8, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 1, 2),
    (libc::SYS_openat, 2, 3),
];

/// System calls answered "not implemented": their arguments sit behind a
/// pointer a filter cannot read (`clone3`'s flags, `openat2`'s mode), and
/// libc falls back to `clone` and `openat`, which the main filter checks.
const NOT_IMPLEMENTED: &[libc::c_long] = &[libc::SYS_clone3, libc::SYS_openat2];

/// The compiled filters, installed in order in the child. Compiled in the
/// parent: compiling allocates, and the child may not.
pub(crate) fn compile(network: bool) -> Result<Vec<BpfProgram>, ConfineError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| ConfineError::UnsupportedArch { arch: std::env::consts::ARCH })?;
    let seccomp = |source| ConfineError::Seccomp { source };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let bit_set = |index: u8, bit: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(bit), bit).map_err(seccomp)
    };
    let mut clone_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        clone_rules.push(SeccompRule::new(vec![bit_set(0, flag as u64)?]).map_err(seccomp)?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    for &(nr, mode) in MODE_SETTERS {
        let mut set_id = Vec::new();
        for &bit in SET_ID_BITS {
            set_id.push(SeccompRule::new(vec![bit_set(mode, bit)?]).map_err(seccomp)?);
        }
        rules.insert(nr, set_id);
    }
    let tmpfile = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64;
    for &(nr, flags, mode) in CREATORS {
        let mut set_id = Vec::new();
        for creating in [libc::O_CREAT as u64, tmpfile] {
            for &bit in SET_ID_BITS {
                set_id.push(SeccompRule::new(vec![bit_set(flags, creating)?, bit_set(mode, bit)?]).map_err(seccomp)?);
            }
        }
        rules.insert(nr, set_id);
    }
    for &nr in REFUSED {
        rules.insert(nr, Vec::new());
    }
    for &(nr, index) in ONLY_ON_ITSELF {
        let other = SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0).map_err(seccomp)?;
        rules.insert(nr, vec![SeccompRule::new(vec![other]).map_err(seccomp)?]);
    }
    // prlimit64(pid, resource, new, old) with a new value sets a limit; with
    // NULL it only reads one (glibc's getrlimit is that call).
    let sets = SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0).map_err(seccomp)?;
    rules.insert(libc::SYS_prlimit64, vec![SeccompRule::new(vec![sets]).map_err(seccomp)?]);
    let mut ioctls = Vec::new();
    for &request in REFUSED_IOCTLS {
        let is =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, u64::from(request)).map_err(seccomp)?;
        ioctls.push(SeccompRule::new(vec![is]).map_err(seccomp)?);
    }
    rules.insert(libc::SYS_ioctl, ioctls);
    // One rule whose conditions all hold: the family is none of the allowed.
    let families = if network { NETWORK_FAMILIES } else { LOCAL_FAMILIES };
    let mut other_family = Vec::new();
    for &family in families {
        other_family
            .push(SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64).map_err(seccomp)?);
    }
    let socket_rule = SeccompRule::new(other_family).map_err(seccomp)?;
    rules.insert(libc::SYS_socket, vec![socket_rule.clone()]);
    rules.insert(libc::SYS_socketpair, vec![socket_rule]);

    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(seccomp)?;
    let main: BpfProgram = filter.try_into().map_err(seccomp)?;
    let not_implemented = SeccompFilter::new(
        NOT_IMPLEMENTED.iter().map(|&nr| (nr, Vec::new())).collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(seccomp)?;
    let mut programs = vec![main, not_implemented.try_into().map_err(seccomp)?];
    if let Some(x32) = x32_guard() {
        programs.push(x32);
    }
    Ok(programs)
}

/// Whether this kernel has seccomp filters: `/proc/self/status` has a
/// `Seccomp_filters:` line exactly when it was built with them (Linux 5.9
/// and later; older kernels are below the Landlock ABI needed anyway).
pub(crate) fn check_supported() -> Result<(), ConfineError> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|source| ConfineError::SeccompUnsupported { reason: format!("/proc/self/status: {source}") })?;
    if status.lines().any(|line| line.starts_with("Seccomp_filters:")) {
        Ok(())
    } else {
        Err(ConfineError::SeccompUnsupported { reason: "the kernel has no seccomp filters".into() })
    }
}

/// On x86_64 the x32 ABI reuses the x86_64 audit arch with its system call
/// numbers offset by bit 30: a filter keyed by exact numbers (as the one
/// above) would let `socket` through under its x32 number. This one kills any
/// x32 call outright (on kernels built without x32 it changes nothing).
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> Option<BpfProgram> {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let code = |c: u32| c as u16;
    Some(vec![
        // A = seccomp_data.nr
        sock_filter { code: code(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS), jt: 0, jf: 0, k: 0 },
        // if A >= X32_SYSCALL_BIT: kill, else: allow
        sock_filter { code: code(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K), jt: 0, jf: 1, k: X32_SYSCALL_BIT },
        sock_filter { code: code(libc::BPF_RET | libc::BPF_K), jt: 0, jf: 0, k: libc::SECCOMP_RET_KILL_PROCESS },
        sock_filter { code: code(libc::BPF_RET | libc::BPF_K), jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
    ])
}

#[cfg(not(target_arch = "x86_64"))]
fn x32_guard() -> Option<BpfProgram> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_network_settings_compile() {
        for network in [false, true] {
            let programs = compile(network).expect("the filter compiles");
            assert!(!programs.is_empty());
            assert!(programs.iter().all(|p| !p.is_empty() && p.len() < 4096));
        }
    }
}
