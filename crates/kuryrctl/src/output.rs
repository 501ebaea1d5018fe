//! Output: aligned tables for people (colours only when stdout is a terminal and NO_COLOR is unset), JSON
//! for scripts, and a progress line on stderr (terminal only) for operations with many steps.

use std::io::{IsTerminal, Write};

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// How a cell is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
}

impl Tone {
    fn ansi(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Good => Some("\x1b[32m"),
            Tone::Warn => Some("\x1b[33m"),
            Tone::Bad => Some("\x1b[31;1m"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell {
            text: s.to_owned(),
            tone: Tone::Plain,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell {
            text,
            tone: Tone::Plain,
        }
    }
}

pub fn toned(text: impl Into<String>, tone: Tone) -> Cell {
    Cell {
        text: text.into(),
        tone,
    }
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(headers: Vec<&'static str>) -> Self {
        Self {
            headers,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Columns padded to their widest cell; `colour` adds ANSI colours (padding counts visible text only).
    pub fn render(&self, colour: bool) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.text.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<(String, Tone)>, out: &mut String| {
            let last = cells.len().saturating_sub(1);
            for (i, (text, tone)) in cells.into_iter().enumerate() {
                let pad = if i == last {
                    0
                } else {
                    widths[i] - text.chars().count() + 2
                };
                match tone.ansi().filter(|_| colour) {
                    Some(code) => out.push_str(&format!("{code}{text}\x1b[0m")),
                    None => out.push_str(&text),
                }
                out.push_str(&" ".repeat(pad));
            }
            out.push('\n');
        };
        line(
            self.headers
                .iter()
                .map(|h| ((*h).to_owned(), Tone::Plain))
                .collect(),
            &mut out,
        );
        for r in &self.rows {
            line(
                r.iter().take(n).map(|c| (c.text.clone(), c.tone)).collect(),
                &mut out,
            );
        }
        out
    }
}

/// Colours when stdout is a terminal and `NO_COLOR` is not set.
pub fn colour_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Writes `table` (human) or `json` (scripts).
pub fn emit<T: Serialize>(out: &mut dyn Write, fmt: Format, table: &Table, json: &T) -> anyhow::Result<()> {
    match fmt {
        Format::Table => out.write_all(table.render(colour_stdout()).as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, json)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// A `[n/total] step` line on stderr, redrawn in place; silent when stderr is not a terminal.
pub struct Progress {
    total: usize,
    done: usize,
    on: bool,
}

impl Progress {
    pub fn new(total: usize) -> Self {
        Self {
            total,
            done: 0,
            on: std::io::stderr().is_terminal(),
        }
    }

    pub fn step(&mut self, what: &str) {
        self.done += 1;
        if self.on {
            let width = 24;
            let filled = (self.done * width)
                .checked_div(self.total)
                .unwrap_or(width)
                .min(width);
            eprint!(
                "\r\x1b[2K[{}{}] {}/{} {what}",
                "#".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total
            );
        }
    }

    pub fn finish(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_colour_codes_do_not_count_as_width() {
        let mut t = Table::new(vec!["CHECK", "RESULT", "DETAIL"]);
        t.row(vec![
            "neutron trunk".into(),
            toned("PASS", Tone::Good),
            "ok".into(),
        ]);
        t.row(vec!["q".into(), toned("FAIL", Tone::Bad), "too small".into()]);
        let plain = t.render(false);
        assert_eq!(
            plain,
            "CHECK          RESULT  DETAIL\nneutron trunk  PASS    ok\nq              FAIL    too small\n"
        );
        let coloured = t.render(true);
        assert!(coloured.contains("\x1b[31;1mFAIL\x1b[0m    too small"));
        assert!(!plain.contains('\x1b'));
    }
}
