/// The headers of a request or a response: (name, value) pairs in order, a name
/// repeated as often as it came, because some (`set-cookie`, `x-forwarded-for`) carry
/// one value per line and may not be joined.
///
/// Names compare without regard to case, as HTTP says; wasi:http gives them in lower
/// case. Values are bytes: HTTP allows any but control characters, not only UTF-8.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Vec<(String, Vec<u8>)>,
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a header after the others, keeping any of the same name.
    pub fn append(&mut self, name: impl Into<String>, value: impl AsRef<[u8]>) {
        self.entries.push((name.into(), value.as_ref().to_vec()));
    }

    /// Sets a header: removes those of the same name, then appends this one.
    pub fn set(&mut self, name: impl Into<String>, value: impl AsRef<[u8]>) {
        let name = name.into();
        self.remove(&name);
        self.append(name, value);
    }

    /// Removes every header named `name`.
    pub fn remove(&mut self, name: &str) {
        self.entries.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// The first value of `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }

    /// The first value of `name` as text, if there is one and it is UTF-8.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|value| std::str::from_utf8(value).ok())
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.entries.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }

    /// Every header, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// How many headers there are, repeated names counted each time.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<N: Into<String>, V: AsRef<[u8]>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(pairs: I) -> Self {
        let mut headers = Headers::new();
        for (name, value) in pairs {
            headers.append(name, value);
        }
        headers
    }
}

impl IntoIterator for Headers {
    type Item = (String, Vec<u8>);
    type IntoIter = std::vec::IntoIter<(String, Vec<u8>)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_are_kept_in_order() {
        let headers: Headers = [("x-repeat", "1"), ("Content-Type", "text/plain"), ("X-Repeat", "2")].into_iter().collect();
        assert_eq!(headers.get_all("x-repeat").collect::<Vec<_>>(), [b"1", b"2"]);
        assert_eq!(headers.get("content-type"), Some(&b"text/plain"[..]));
        assert_eq!(headers.get_str("CONTENT-TYPE"), Some("text/plain"));
        assert_eq!(headers.get("absent"), None);
        assert_eq!(headers.len(), 3);
    }

    #[test]
    fn set_replaces_every_value_of_a_name() {
        let mut headers = Headers::new();
        headers.append("a", "1");
        headers.append("b", "2");
        headers.append("A", "3");
        headers.set("a", "4");
        assert_eq!(headers.iter().collect::<Vec<_>>(), [("b", &b"2"[..]), ("a", &b"4"[..])]);
        headers.remove("B");
        assert_eq!(headers.into_iter().collect::<Vec<_>>(), [("a".to_owned(), b"4".to_vec())]);
    }

    #[test]
    fn values_need_not_be_text() {
        let mut headers = Headers::new();
        headers.append("x-bytes", [0xff, 0x00]);
        assert_eq!(headers.get("x-bytes"), Some(&[0xff, 0x00][..]));
        assert_eq!(headers.get_str("x-bytes"), None);
    }
}
