//! The allowlist of outbound hosts: which runtimes the server may call
//! (`controls.allowed_hosts`), and what counts as a callable http(s) URL.
//! A leaf module: configuration checks entries with it, the relay applies it.

use reqwest::Url;

/// One allowlist entry (`controls.allowed_hosts`): a host name, with or
/// without a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    host: String,
    port: Option<u16>,
}

impl AllowedHost {
    /// `host`, `host:port`, `[v6]` or `[v6]:port`; case-insensitive.
    pub fn parse(entry: &str) -> Option<AllowedHost> {
        let e = entry.trim().to_ascii_lowercase();
        let (host, port) = if e.starts_with('[') {
            let end = e.find(']')?;
            let (host, rest) = e.split_at(end + 1);
            match rest {
                "" => (host.to_string(), None),
                r => (host.to_string(), Some(r.strip_prefix(':')?.parse().ok()?)),
            }
        } else {
            match e.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p.parse().ok()?)),
                None => (e.clone(), None),
            }
        };
        let bad = |c: char| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#');
        (!host.is_empty() && !host.contains(bad)).then_some(AllowedHost { host, port })
    }

    /// True when `url` is on this host (and port, when one is named).
    pub fn allows(&self, url: &Url) -> bool {
        url.host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
            && self
                .port
                .is_none_or(|p| url.port_or_known_default() == Some(p))
    }
}

/// `s` as an http(s) URL with a host, or `None`.
pub fn http_url(s: &str) -> Option<Url> {
    let url = Url::parse(s).ok()?;
    (matches!(url.scheme(), "http" | "https") && url.host_str().is_some()).then_some(url)
}
