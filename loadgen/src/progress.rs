//! The live progress line: one per second while a cell runs, rewritten in place on a terminal
//! and printed line by line otherwise (CI logs).

use std::io::{IsTerminal, Write};

pub struct Progress {
    tty: bool,
    dirty: bool,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            dirty: false,
        }
    }
}

impl Progress {
    /// Shows `line` (replacing the previous one on a terminal).
    pub fn update(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.dirty = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Ends the current line so the next message starts clean.
    pub fn finish(&mut self) {
        if self.dirty {
            eprintln!();
            self.dirty = false;
        }
    }

    /// A message on its own line.
    pub fn say(&mut self, message: &str) {
        self.finish();
        eprintln!("{message}");
    }
}
