//! Log fields without colours, written straight: `name=value` as
//! tracing-subscriber's default writes them with colours off. The default
//! builds a styled string for every field name and `=` even when it then
//! paints nothing, and every request's span has four fields: about 1% of a
//! single-event POST (docs/BENCHMARKS.md). Text logs with colours keep the
//! default.

use std::error::Error;
use std::fmt::{self, Debug, Display, Write};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;

/// The fields of spans and events as the default writes them without
/// colours (the message bare, other fields `name=value`, `r#` dropped from
/// names, `log.*` skipped, an error's sources listed, control characters of
/// messages and errors escaped).
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainFields;

/// Room for the fields of a request's span (method, path, request and
/// session ids) and of most log lines.
const FIELDS_BYTES: usize = 256;

impl<'w> FormatFields<'w> for PlainFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        // Written into a buffer with room first and handed over in one
        // piece: a span's fields go to a string of its own grown from
        // empty, reallocated at every doubling (2% of a single-event POST's
        // instructions, docs/BENCHMARKS.md).
        let mut buf = String::with_capacity(FIELDS_BYTES);
        let mut v = Plain {
            sanitize: writer.sanitizes_ansi_escapes(),
            writer: Writer::new(&mut buf),
            empty: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result?;
        writer.write_str(&buf)
    }
}

struct Plain<'w> {
    writer: Writer<'w>,
    sanitize: bool,
    empty: bool,
    result: fmt::Result,
}

impl Plain<'_> {
    /// A space before every field but the first.
    fn pad(&mut self) -> fmt::Result {
        if self.empty {
            self.empty = false;
            Ok(())
        } else {
            self.writer.write_char(' ')
        }
    }

    fn field(&mut self, field: &Field, value: &dyn Debug) -> fmt::Result {
        let name = field.name();
        if name.starts_with("log.") {
            return Ok(());
        }
        self.pad()?;
        match name {
            "message" => write!(self.writer, "{:?}", Escaped(value, self.sanitize)),
            name => {
                self.writer
                    .write_str(name.strip_prefix("r#").unwrap_or(name))?;
                write!(self.writer, "={value:?}")
            }
        }
    }
}

impl Visit for Plain<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if self.result.is_ok() {
            self.result = self.field(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"))
        } else {
            self.record_debug(field, &value)
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn Error + 'static)) {
        let s = self.sanitize;
        match value.source() {
            Some(source) => self.record_debug(
                field,
                &format_args!(
                    "{} {}.sources={}",
                    Escaped(&format_args!("{value}"), s),
                    field.name(),
                    Sources(source, s)
                ),
            ),
            None => self.record_debug(
                field,
                &format_args!("{}", Escaped(&format_args!("{value}"), s)),
            ),
        }
    }
}

/// A value written with its terminal control characters escaped (as the
/// default does, so that a logged string cannot drive the terminal).
struct Escaped<'a>(&'a dyn Debug, bool);

impl Debug for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 {
            write!(Escaping(f), "{:?}", self.0)
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(self, f)
    }
}

struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for ch in s.chars() {
            match ch {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                '\u{80}'..='\u{9f}' => write!(self.0, "\\u{{{:x}}}", ch as u32)?,
                _ => self.0.write_char(ch)?,
            }
        }
        Ok(())
    }
}

/// An error and its sources, as a list.
struct Sources<'a>(&'a (dyn Error + 'static), bool);

impl Display for Sources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        let mut next = Some(self.0);
        while let Some(e) = next {
            list.entry(&Escaped(&format_args!("{e}"), self.1));
            next = e.source();
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::PlainFields;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("outer \x1b[31mfailed")
        }
    }
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("inner\u{9b} cause")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Inner {}

    /// Every kind of field the server logs, under `layer`'s formatting.
    fn logged(plain: bool) -> String {
        let buf = Buf::default();
        let fmt = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .without_time()
            .with_writer(buf.clone());
        let sub = tracing_subscriber::registry();
        let body = || {
            let span = tracing::info_span!(
                "http",
                method = %"POST",
                path = %"/v1/sessions/s 1/events",
                request_id = "a\"b",
                n = 3,
                later = tracing::field::Empty,
            );
            let _in = span.enter();
            span.record("later", true);
            tracing::warn!(
                status = 503u16,
                latency_ms = 1.5,
                r#type = "x",
                "response \x1b[2J failed"
            );
            let e = Outer(Inner);
            tracing::error!(
                error = &e as &(dyn std::error::Error + 'static),
                "store \u{85}refused"
            );
            tracing::info!(error = %e, what = ?Some("y"), "displayed");
            tracing::info!(a = 1, b = -2i64, c = 0.25, d = false, "");
        };
        if plain {
            tracing::subscriber::with_default(sub.with(fmt.fmt_fields(PlainFields)), body);
        } else {
            tracing::subscriber::with_default(sub.with(fmt), body);
        }
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn plain_fields_write_what_the_default_writes_without_colours() {
        let (default, plain) = (logged(false), logged(true));
        assert_eq!(default.lines().count(), 4, "{default}");
        assert!(default.contains("\\x1b[2J"), "escaped: {default}");
        assert!(default.contains("error.sources="), "{default}");
        assert_eq!(plain, default);
    }
}
