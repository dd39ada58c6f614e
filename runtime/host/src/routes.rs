//! Routes an HTTP function declares at deploy (`?routes=/api,shop.example.com/,/v2@7`):
//! a path prefix, optionally behind a host name, and optionally the book its requests
//! run on (`@N`; otherwise the `Tally-Book` header's, or 0). A request matches a route
//! when its host is the route's (if it names one) and its path is the prefix or goes on
//! below it after a `/`; the function gets the path below the prefix. Among the routes
//! a request matches, one naming its host wins over one naming none, then the longest
//! prefix, then the function deployed first (every node picks the same one). A deploy
//! that claims a route another function holds is refused. The gateway's own paths
//! (`/v1`, `/fn`, `/ui`, `/healthz`, `/metrics`) are no one's.

/// A route of an HTTP function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Lowercase, without a port.
    pub host: Option<String>,
    /// Starts with `/`; no `/` at its end unless it is `/`.
    pub prefix: String,
    pub book: Option<u64>,
}

/// The gateway's paths, which no route may take.
const RESERVED: &[&str] = &["/v1", "/fn", "/ui", "/healthz", "/metrics"];

impl Route {
    /// `[host]/prefix[@book]`.
    pub fn parse(text: &str) -> Result<Route, String> {
        let refuse = |why: &str| format!("route {text:?}: {why}");
        let (route, book) = match text.rsplit_once('@') {
            Some((r, b)) => (r, Some(b.parse::<u64>().map_err(|_| refuse("the book after @ is not a number"))?)),
            None => (text, None),
        };
        if book.is_some_and(|b| b >> 63 == 1) {
            return Err(refuse("that book is reserved for the platform"));
        }
        let slash = route.find('/').ok_or_else(|| refuse("a route is [host]/prefix"))?;
        let (host, prefix) = route.split_at(slash);
        let host = match host {
            "" => None,
            h if h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') => Some(h.to_ascii_lowercase()),
            _ => return Err(refuse("a host is letters, digits, '-' and '.', without a port")),
        };
        let prefix = match prefix.trim_end_matches('/') {
            "" => "/".to_string(),
            p => p.to_string(),
        };
        if prefix.contains(['?', '#', '%', ' ']) || prefix.contains("//") {
            return Err(refuse("a prefix is a plain path"));
        }
        if host.is_none() && RESERVED.iter().any(|r| covers(&prefix, r) || covers(r, &prefix)) {
            return Err(refuse("the gateway's own paths (/v1, /fn, /ui, /healthz, /metrics) are no function's"));
        }
        Ok(Route { host, prefix, book })
    }

    /// The path below the route, if a request for `host` and `path` matches it.
    pub fn matches<'p>(&self, host: Option<&str>, path: &'p str) -> Option<&'p str> {
        if let Some(want) = &self.host {
            let host = host?;
            let name = match host.rsplit_once(':') {
                Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
                _ => host,
            };
            if !name.eq_ignore_ascii_case(want) {
                return None;
            }
        }
        if self.prefix == "/" {
            return Some(path);
        }
        match path.strip_prefix(self.prefix.as_str())? {
            "" => Some("/"),
            rest if rest.starts_with('/') => Some(rest),
            _ => None,
        }
    }

    /// Whether two routes claim the same requests.
    pub fn same_claim(&self, other: &Route) -> bool {
        self.host == other.host && self.prefix == other.prefix
    }

    /// How specific the route is: a host first, then the prefix's length.
    pub fn rank(&self) -> (bool, usize) {
        (self.host.is_some(), self.prefix.len())
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.host.as_deref().unwrap_or(""), self.prefix)?;
        match self.book {
            Some(b) => write!(f, "@{b}"),
            None => Ok(()),
        }
    }
}

/// Whether `prefix` covers `path`: equal, or `path` goes on below it.
fn covers(prefix: &str, path: &str) -> bool {
    prefix == "/" || path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

/// A comma-separated list of routes.
pub fn parse_routes(text: &str) -> Result<Vec<Route>, String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Route::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_and_refuse_what_is_the_gateways() {
        let r = Route::parse("Shop.Example.com/v2/@7").unwrap();
        assert_eq!(r, Route { host: Some("shop.example.com".into()), prefix: "/v2".into(), book: Some(7) });
        assert_eq!(r.to_string(), "shop.example.com/v2@7");
        assert_eq!(Route::parse("shop.example.com/").unwrap().prefix, "/", "a host's whole tree");
        // Without a host, "/" would take the gateway's own paths.
        for bad in [
            "api",
            "/v1",
            "/v1/x",
            "/fn",
            "/ui",
            "/ui/x",
            "/metrics",
            "/",
            "/a?b",
            "/a//b",
            "/a@x",
            "/a@9223372036854775809",
            "h:80/a",
        ] {
            assert!(Route::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_route_matches_its_prefix_and_below_it_only() {
        let api = Route::parse("/api").unwrap();
        assert_eq!(api.matches(None, "/api"), Some("/"));
        assert_eq!(api.matches(None, "/api/users/7"), Some("/users/7"));
        assert_eq!(api.matches(None, "/apix"), None);
        assert_eq!(api.matches(None, "/"), None);
        let shop = Route::parse("shop.example.com/").unwrap();
        assert_eq!(shop.matches(Some("shop.example.com:8080"), "/cart"), Some("/cart"));
        assert_eq!(shop.matches(Some("SHOP.example.com"), "/"), Some("/"));
        assert_eq!(shop.matches(Some("other.example.com"), "/cart"), None);
        assert_eq!(shop.matches(None, "/cart"), None);
        assert!(shop.rank() > api.rank());
    }
}
