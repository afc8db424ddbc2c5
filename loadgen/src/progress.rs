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
            let line = fit_terminal(line);
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

/// `line` cut to the terminal's width (`COLUMNS` when set, else 100) less one: a rewritten line
/// that wrapped would leave its first rows behind on the screen.
fn fit_terminal(line: &str) -> String {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|w| *w > 20)
        .unwrap_or(100);
    line.chars().take(width - 1).collect()
}
