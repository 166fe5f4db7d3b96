//! Dropping every capability: a confined process that is root (uid 0)
//! inside keeps no privilege that counts outside.
//!
//! The mount view takes away what root could reach by path; this takes
//! away what it could do by capability: `mknod` of a device, `chattr +i`,
//! `chown`, reading another user's files past their mode, real-time
//! scheduling, raising its own limits, and the like. All five sets are
//! emptied (effective, permitted, inheritable, ambient and the bounding
//! set), and the secure bits are set and locked so that no `exec` gives
//! them back, not even of a set-user-ID-root program: uid 0 stays an
//! ordinary uid for the kernel from then on.

use std::io;

/// The highest capability number this kernel knows, read in the parent
/// once per process.
pub(crate) fn last_capability() -> u32 {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            // CAP_CHECKPOINT_RESTORE, the last in Linux 6.x.
            .unwrap_or(40)
    })
}

/// `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP`, `SECBIT_KEEP_CAPS_LOCKED`
/// and `SECBIT_NO_CAP_AMBIENT_RAISE`, each with its lock.
const SECURE_BITS: libc::c_ulong = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7);

/// In the child: drops every capability for good. Needs `CAP_SETPCAP` (in
/// the child's user namespace) until its last step, so it runs after the
/// mount view is made and before `no_new_privs`.
pub(crate) fn drop_all(last_capability: u32) -> io::Result<()> {
    raw::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS)?;
    for capability in 0..=last_capability {
        match raw::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(capability)) {
            // A number this kernel does not know: nothing to drop.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            other => other?,
        }
    }
    raw::prctl_ambient_clear()?;
    raw::capset_empty()
}

#[expect(unsafe_code, reason = "raw prctl and capset calls, with no pointer but to a local")]
mod raw {
    use std::io;

    fn check(result: libc::c_long) -> io::Result<()> {
        if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    pub(super) fn prctl(option: libc::c_int, value: libc::c_ulong) -> io::Result<()> {
        // SAFETY: the options used here take integers only.
        check(unsafe { libc::prctl(option, value, 0, 0, 0) } as libc::c_long)
    }

    pub(super) fn prctl_ambient_clear() -> io::Result<()> {
        // SAFETY: as above.
        check(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) } as libc::c_long)
    }

    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }

    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }

    /// `_LINUX_CAPABILITY_VERSION_3`: two `Data`, 64 capabilities.
    const VERSION_3: u32 = 0x2008_0522;

    pub(super) fn capset_empty() -> io::Result<()> {
        let mut header = Header { version: VERSION_3, pid: 0 };
        let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        // SAFETY: both pointers are to locals of the layout the kernel reads.
        check(unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) })
    }
}
