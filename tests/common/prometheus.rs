//! Reading Prometheus text (version 0.0.4) as a scraper does: every sample line parsed into
//! its name, labels and value; a malformed line fails the test.

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a scrape.
pub struct Scrape(pub Vec<Sample>);

impl Scrape {
    pub fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text.lines() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_line(line).unwrap_or_else(|e| panic!("{e}: {line:?}")));
        }
        Scrape(samples)
    }

    /// The sum of the samples of `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The samples of `name` whose labels include `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }
}

fn parse_line(line: &str) -> Result<Sample, String> {
    let (name, rest) = match line.find('{') {
        Some(open) => (&line[..open], &line[open..]),
        None => line.split_at(line.find(' ').ok_or("no value")?),
    };
    let mut labels = BTreeMap::new();
    let mut rest = rest;
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let mut end = None;
        let mut key = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(i);
                    break;
                }
                ',' => {}
                '=' => {
                    if chars.next().map(|(_, c)| c) != Some('"') {
                        return Err("a label value is not quoted".into());
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next().ok_or("an unterminated label value")?.1 {
                            '\\' => match chars.next().ok_or("a dangling escape")?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        }
        let end = end.ok_or("unterminated labels")?;
        rest = &body[end + 1..];
    }
    let value = rest.split_whitespace().next().ok_or("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|e| format!("value {v:?}: {e}"))?,
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err(format!("bad metric name {name:?}"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}
