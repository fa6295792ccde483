//! How Linux reports a failed system call: -1, with the reason in the thread's `errno`.

use std::io;

/// Turns a -1 return into the thread's `errno` as an `io::Error`.
pub fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
