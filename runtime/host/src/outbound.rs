//! Where a function may send requests: its allow-list of destinations, set at deploy
//! (`?outbound=https://api.example.com,http://127.0.0.1:9000`), empty by default, and
//! the addresses no request reaches unless the allow-list names them.
//!
//! A destination is a scheme, a host and a port (the scheme's default if none is
//! given): a request goes out only if its origin is on the list. After the name is
//! resolved, every address is checked: loopback, private, link-local (the cloud
//! metadata service at 169.254.169.254 included), unspecified, multicast, shared
//! (100.64.0.0/10) and unique-local addresses are refused, unless the allowed
//! destination names the address itself (`http://127.0.0.1:9000`, `http://[::1]:80`) or
//! `localhost`. The request then goes to the address that was checked, never to a name
//! resolved again, so a DNS answer that changes between the check and the connection
//! (DNS rebinding) cannot reach an address the check refused. A redirect is a new
//! request from the guest (wasi:http does not follow them), checked again.

use std::net::IpAddr;

/// A destination a function may send requests to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// `https://host[:port]` or `http://host[:port]`, nothing after the authority but
    /// an optional `/`.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let refuse = |why: &str| format!("outbound destination {text:?}: {why}");
        let (scheme, rest) = text.split_once("://").ok_or_else(|| refuse("not scheme://host[:port]"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(refuse("the scheme is not http or https")),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', '*']) {
            return Err(refuse("only a host and a port may follow the scheme"));
        }
        // A destination names a host; in brackets, an IPv6 address.
        let bracketed_ok = |host: &str| !authority.starts_with('[') || host.parse::<std::net::Ipv6Addr>().is_ok();
        let (host, port) = split_host_port(authority)
            .filter(|(host, _)| !host.is_empty() && bracketed_ok(host))
            .ok_or_else(|| refuse("not host[:port]"))?;
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| refuse("the port is not 1 to 65535"))?,
            None => default_port,
        };
        Ok(Destination { scheme, host: host.to_ascii_lowercase(), port })
    }

    /// Whether the destination names a host whose addresses would be refused otherwise:
    /// an address literal, or `localhost`.
    fn names_its_address(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok()
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "{}://[{}]:{}", self.scheme, self.host, self.port),
            false => write!(f, "{}://{}:{}", self.scheme, self.host, self.port),
        }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, with the brackets taken off.
pub(crate) fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && !host.is_empty() => Some((host, Some(port))),
        Some(_) => None,
        None => Some((authority, None)),
    }
}

/// A function's allow-list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outbound {
    pub allowed: Vec<Destination>,
}

impl Outbound {
    /// A comma-separated list of destinations.
    pub fn parse(text: &str) -> Result<Outbound, String> {
        let allowed =
            text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Destination::parse).collect::<Result<_, _>>()?;
        Ok(Outbound { allowed })
    }

    /// The allowed destination a request to `scheme://host:port` goes to, or why it
    /// may not go.
    pub fn check(&self, scheme: &str, host: &str, port: u16) -> Result<&Destination, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.allowed.iter().find(|d| d.scheme.eq_ignore_ascii_case(scheme) && d.host == host && d.port == port).ok_or_else(|| {
            match self.allowed.is_empty() {
                true => format!(
                    "{scheme}://{host}:{port} is not allowed: this function may send no requests (deploy it with ?outbound=...)"
                ),
                false => format!("{scheme}://{host}:{port} is not on this function's outbound list"),
            }
        })
    }

    /// The addresses of `to`'s host a request may connect to, of `resolved`: all of
    /// them if the destination names its address, else the public ones.
    pub fn reachable(to: &Destination, resolved: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
        if to.names_its_address() {
            return Ok(resolved.to_vec());
        }
        let public: Vec<IpAddr> = resolved.iter().copied().filter(|ip| !is_internal(*ip)).collect();
        match (public.is_empty(), resolved.first()) {
            (false, _) => Ok(public),
            (true, Some(ip)) => {
                Err(format!("{} resolves to {ip}, an address that is not public; allow it by naming the address itself", to.host))
            }
            (true, None) => Err(format!("{} resolves to no address", to.host)),
        }
    }
}

/// Whether an address is one a request may not reach unless named explicitly.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first == 0x64 && v6.segments()[1] == 0xff9b)
                || (first == 0x2001 && v6.segments()[1] == 0xdb8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse_with_default_ports_and_refuse_anything_else() {
        let d = Destination::parse("HTTPS://Api.Example.com/").unwrap();
        assert_eq!(d, Destination { scheme: "https".into(), host: "api.example.com".into(), port: 443 });
        assert_eq!(Destination::parse("http://127.0.0.1:9000").unwrap().port, 9000);
        assert_eq!(Destination::parse("http://[::1]:8080").unwrap().host, "::1");
        for bad in [
            "api.example.com",
            "ftp://x",
            "https://x/path",
            "https://user@x",
            "https://*.x.com",
            "https://x:0",
            "https://x:70000",
            "https://",
            "http://::1",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }

    /// Found by the `outbound` fuzz target: `http://[]` was a destination of no host,
    /// which printed as `http://:80`, a destination that does not parse.
    #[test]
    fn a_destination_names_a_host() {
        for bad in ["http://[]", "http://[]:80", "https://[]/"] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }

    /// Found by the `outbound` fuzz target (seed 52, in a run of 60 s): `http://[[]`
    /// was a destination of host `[`, which printed as a destination that does not
    /// parse. Brackets hold an IPv6 address, nothing else.
    #[test]
    fn a_bracketed_host_is_an_ipv6_address() {
        for bad in ["http://[[]", "http://[é1]:80", "https://[localhost]", "http://[1.2.3.4]"] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Destination::parse("http://[fd00::1]:8080").unwrap().to_string(), "http://[fd00::1]:8080");
    }

    #[test]
    fn only_listed_origins_pass_and_internal_addresses_need_naming() {
        let out = Outbound::parse("https://api.example.com, http://127.0.0.1:9000,http://localhost:7000").unwrap();
        assert!(out.check("https", "api.example.com", 443).is_ok());
        assert!(out.check("http", "api.example.com", 443).is_err(), "another scheme");
        assert!(out.check("https", "api.example.com", 8443).is_err(), "another port");
        assert!(out.check("https", "evil.example.com", 443).is_err());
        assert!(Outbound::default().check("https", "api.example.com", 443).unwrap_err().contains("no requests"));

        let named = out.check("http", "127.0.0.1", 9000).unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(Outbound::reachable(named, &[loopback]).unwrap(), vec![loopback]);
        let local = out.check("http", "localhost", 7000).unwrap();
        assert!(Outbound::reachable(local, &[loopback]).is_ok());
        // A name that resolves to an internal address (a DNS answer that changed, say)
        // is refused; its public addresses are kept.
        let api = out.check("https", "api.example.com", 443).unwrap();
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "192.168.1.1",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
        ] {
            let ip: IpAddr = internal.parse().unwrap();
            assert!(Outbound::reachable(api, &[ip]).is_err(), "{internal}");
        }
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert_eq!(Outbound::reachable(api, &[loopback, public]).unwrap(), vec![public]);
    }
}
