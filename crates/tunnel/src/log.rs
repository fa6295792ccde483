//! The tunnel's log files: each endpoint can keep an ingress and an egress log of every datagram,
//! each in the native form, the original's text form, or both, and a log of its clock exchanges. The formats themselves
//! (`pantheon_format::tunnel_log`, docs/tunnel.md) are shared with the simulator; this module
//! owns the files, and keeps the tunnel running when one of them fails (the endpoint then exits
//! non-zero at the end: its logs are incomplete).

use std::fs::File;
use std::io::{self, BufWriter, Write};

use pantheon_format::line::LineBuffer;
use pantheon_format::tunnel_log::{clock_header, native_header, native_line, text_header, text_line, Context, Side};
use pantheon_link::Ecn;

const BUFFER_BYTES: usize = 1 << 20;

/// One side's log files. A write error stops that side's logging and is kept for the end of the
/// run: the tunnel goes on carrying the command's traffic.
pub struct Log {
    native: Option<BufWriter<File>>,
    text: Option<BufWriter<File>>,
    /// The native line being written.
    native_line: LineBuffer,
    /// The text line being written.
    line: Vec<u8>,
    error: Option<io::Error>,
}

impl Log {
    /// A log into the files given (none: a log that records nothing); writes their headers.
    pub fn new(side: Side, native: Option<File>, text: Option<File>, context: &Context) -> Log {
        let mut log = Log {
            native: None,
            text: None,
            native_line: LineBuffer::default(),
            line: Vec::with_capacity(64),
            error: None,
        };
        let mut start = |file: File, header: String| {
            let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
            match out.write_all(header.as_bytes()) {
                Ok(()) => Some(out),
                Err(e) => {
                    log.error.get_or_insert(e);
                    None
                }
            }
        };
        let native = native.and_then(|f| start(f, native_header(side, context)));
        let text = text.and_then(|f| start(f, text_header(side, context)));
        Log { native, text, ..log }
    }

    /// One datagram: when, its UID, its size and ECN codepoint (the text form has no place for it).
    pub fn record(&mut self, t_us: u64, uid: u64, inner_bytes: usize, ecn: Ecn) {
        if let Some(out) = self.native.as_mut() {
            if let Err(e) = out.write_all(native_line(&mut self.native_line, t_us, uid, inner_bytes as u64, ecn)) {
                self.native = None;
                self.error.get_or_insert(e);
            }
        }
        if let Some(out) = self.text.as_mut() {
            self.line.clear();
            text_line(&mut self.line, t_us, uid, inner_bytes);
            if let Err(e) = out.write_all(&self.line) {
                self.text = None;
                self.error.get_or_insert(e);
            }
        }
    }

    /// Flushes both files; the first error of the run, if any.
    pub fn finish(mut self) -> io::Result<()> {
        for out in [self.native.take(), self.text.take()].into_iter().flatten() {
            if let Err(e) = out.into_inner().map_err(|e| e.into_error()) {
                self.error.get_or_insert(e);
            }
        }
        self.error.map_or(Ok(()), Err)
    }
}

/// The clock exchanges this endpoint initiated (`--clock-log`, docs/tunnel.md): a header, then
/// one line `t1_us t2_us t3_us t4_us` per exchange, written (unbuffered) as it completes, so an
/// endpoint killed mid-run keeps every exchange it had.
pub struct ClockLog {
    file: Option<File>,
    error: Option<io::Error>,
}

impl ClockLog {
    /// A log into `file` (none: a log that records nothing); writes its header.
    pub fn new(file: Option<File>, context: &Context) -> ClockLog {
        let mut log = ClockLog { file, error: None };
        log.write(clock_header(context).as_bytes());
        log
    }

    pub fn record(&mut self, t1_us: u64, t2_us: u64, t3_us: u64, t4_us: u64) {
        self.write(format!("{t1_us} {t2_us} {t3_us} {t4_us}\n").as_bytes());
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Some(file) = self.file.as_mut() {
            if let Err(e) = file.write_all(bytes) {
                self.file = None;
                self.error.get_or_insert(e);
            }
        }
    }

    /// The first error of the run, if any.
    pub fn finish(self) -> io::Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}
