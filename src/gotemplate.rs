//! The part of Go's `text/template` (with sprig's hermetic functions) that ClusterClass patches
//! use in `enabledIf` and `valueFrom.template`: actions with `{{-`/`-}}` trimming, field chains
//! on the variables (`.builtin.controlPlane.version`), pipelines, `if`/`else if`/`else`,
//! `range` and `with`, and the functions templates reach for (`eq`, `ne`, `and`, `not`,
//! `printf`, `replace`, `semverCompare`, `default`, `quote`, `toJson`, `indent`, …).
//!
//! A missing variable prints `<no value>`, as Go prints a missing map key; rendering fails
//! only for a template that does not parse or calls what does not exist.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(String);

fn error<T>(message: impl Into<String>) -> Result<T, TemplateError> {
    Err(TemplateError(message.into()))
}

/// Renders `template` with `data` as its dot.
pub fn render(template: &str, data: &Value) -> Result<String, TemplateError> {
    let nodes = parse(template)?;
    let mut out = String::new();
    execute(&nodes, &Data::Value(data.clone()), data, &mut out)?;
    Ok(out)
}

/// Whether a template parses, with the parser's complaint when it does not.
pub fn check(template: &str) -> Result<(), TemplateError> {
    parse(template).map(|_| ())
}

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Action(Pipeline),
    If(Vec<(Pipeline, Vec<Node>)>, Vec<Node>),
    Range(Pipeline, Vec<Node>, Vec<Node>),
    With(Pipeline, Vec<Node>, Vec<Node>),
}

type Pipeline = Vec<Command>;
type Command = Vec<Arg>;

#[derive(Debug, Clone)]
enum Arg {
    /// `.a.b` (an empty chain is the dot itself).
    Field(Vec<String>),
    /// `$.a.b`.
    Root(Vec<String>),
    Literal(Value),
    Function(String),
    Sub(Pipeline),
}

/// A value in evaluation: JSON, or a variable that is not there.
#[derive(Debug, Clone, PartialEq)]
enum Data {
    Value(Value),
    Missing,
}

impl Data {
    fn value(&self) -> Value {
        match self {
            Data::Value(v) => v.clone(),
            Data::Missing => Value::Null,
        }
    }

    fn truthy(&self) -> bool {
        match self {
            Data::Missing => false,
            Data::Value(v) => match v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
            },
        }
    }

    fn printed(&self) -> String {
        match self {
            Data::Missing => "<no value>".into(),
            Data::Value(v) => print_value(v),
        }
    }
}

/// A value as Go's fmt prints it with `%v`.
fn print_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(print_value).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", print_value(&map[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// A piece of the template: text, or the inside of an action.
enum Piece {
    Text(String),
    Action(String),
}

fn split(template: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut text = &rest[..start];
        if trim_next {
            text = text.trim_start();
        }
        let after = &rest[start + 2..];
        let trim_before =
            after.starts_with("- ") || after.starts_with("-\t") || after.starts_with("-\n");
        if trim_before {
            text = text.trim_end();
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text.to_string()));
        }
        let inner_start = if trim_before { 1 } else { 0 };
        let Some(end) = find_action_end(&after[inner_start..]) else {
            return error("unclosed action: a \"{{\" has no \"}}\"");
        };
        let inner = &after[inner_start..inner_start + end];
        let (inner, trim_after) = match inner.strip_suffix(" -") {
            Some(i) => (i, true),
            None => match inner
                .strip_suffix("\t-")
                .or_else(|| inner.strip_suffix("\n-"))
            {
                Some(i) => (i, true),
                None => (inner, false),
            },
        };
        trim_next = trim_after;
        let inner = inner.trim();
        if !(inner.starts_with("/*") && inner.ends_with("*/")) {
            pieces.push(Piece::Action(inner.to_string()));
        }
        rest = &after[inner_start + end + 2..];
    }
    let text = if trim_next { rest.trim_start() } else { rest };
    if !text.is_empty() {
        pieces.push(Piece::Text(text.to_string()));
    }
    Ok(pieces)
}

/// Where the action that starts here ends (`}}` outside string literals).
fn find_action_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q == b'"' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => {
                if c == b'"' || c == b'`' || c == b'\'' {
                    quote = Some(c);
                } else if c == b'}' && bytes.get(i + 1) == Some(&b'}') {
                    return Some(i);
                }
            }
        }
        i += 1;
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Field(Vec<String>),
    Root(Vec<String>),
    Word(String),
    Literal(Value),
    Pipe,
    Open,
    Close,
}

fn tokens(action: &str) -> Result<Vec<Token>, TemplateError> {
    let chars: Vec<char> = action.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let chain = |i: &mut usize| -> Vec<String> {
        let mut parts = Vec::new();
        while *i < chars.len() && chars[*i] == '.' {
            *i += 1;
            let start = *i;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
            if *i > start {
                parts.push(chars[start..*i].iter().collect());
            }
        }
        parts
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '|' => {
                out.push(Token::Pipe);
                i += 1;
            }
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            '.' => out.push(Token::Field(chain(&mut i))),
            '$' => {
                i += 1;
                out.push(Token::Root(chain(&mut i)));
            }
            '"' => {
                let start = i;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    return error(format!("unterminated quoted string in {action:?}"));
                }
                let literal: String = chars[start..=i].iter().collect();
                let s: String = serde_json::from_str(&literal)
                    .map_err(|_| TemplateError(format!("bad string literal {literal}")))?;
                out.push(Token::Literal(Value::String(s)));
                i += 1;
            }
            '`' => {
                let start = i + 1;
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    i += 1;
                }
                if i >= chars.len() {
                    return error(format!("unterminated raw string in {action:?}"));
                }
                out.push(Token::Literal(Value::String(
                    chars[start..i].iter().collect(),
                )));
                i += 1;
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let number: Value = serde_json::from_str(&text)
                    .map_err(|_| TemplateError(format!("bad number {text}")))?;
                out.push(Token::Literal(number));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(match word.as_str() {
                    "true" => Token::Literal(Value::Bool(true)),
                    "false" => Token::Literal(Value::Bool(false)),
                    "nil" => Token::Literal(Value::Null),
                    _ => Token::Word(word),
                });
            }
            other => return error(format!("unexpected {other:?} in action {action:?}")),
        }
    }
    Ok(out)
}

fn parse_pipeline(
    tokens: &[Token],
    at: &mut usize,
    nested: bool,
) -> Result<Pipeline, TemplateError> {
    let mut pipeline = Vec::new();
    let mut command = Vec::new();
    while *at < tokens.len() {
        let token = tokens[*at].clone();
        *at += 1;
        match token {
            Token::Pipe => {
                if command.is_empty() {
                    return error("missing command before \"|\"");
                }
                pipeline.push(std::mem::take(&mut command));
            }
            Token::Close if nested => {
                if !command.is_empty() {
                    pipeline.push(command);
                }
                return Ok(pipeline);
            }
            Token::Close => return error("unexpected \")\""),
            Token::Open => command.push(Arg::Sub(parse_pipeline(tokens, at, true)?)),
            Token::Field(f) => command.push(Arg::Field(f)),
            Token::Root(f) => command.push(Arg::Root(f)),
            Token::Literal(v) => command.push(Arg::Literal(v)),
            Token::Word(w) => {
                if !is_function(&w) {
                    return error(format!("function {w:?} not defined"));
                }
                command.push(Arg::Function(w));
            }
        }
    }
    if nested {
        return error("unclosed \"(\"");
    }
    if !command.is_empty() {
        pipeline.push(command);
    }
    if pipeline.is_empty() {
        return error("missing value for command");
    }
    Ok(pipeline)
}

fn pipeline_of(text: &str) -> Result<Pipeline, TemplateError> {
    let tokens = tokens(text)?;
    let mut at = 0;
    parse_pipeline(&tokens, &mut at, false)
}

fn parse(template: &str) -> Result<Vec<Node>, TemplateError> {
    let pieces = split(template)?;
    let mut at = 0;
    let (nodes, end) = parse_nodes(&pieces, &mut at)?;
    match end {
        None => Ok(nodes),
        Some(word) => error(format!("unexpected {{{{{word}}}}}")),
    }
}

/// Parses nodes up to an `else…` or `end` (returned) or the end of the template (None).
fn parse_nodes(
    pieces: &[Piece],
    at: &mut usize,
) -> Result<(Vec<Node>, Option<String>), TemplateError> {
    let mut nodes = Vec::new();
    while *at < pieces.len() {
        let piece = &pieces[*at];
        *at += 1;
        let action = match piece {
            Piece::Text(t) => {
                nodes.push(Node::Text(t.clone()));
                continue;
            }
            Piece::Action(a) => a.as_str(),
        };
        let (keyword, rest) = action
            .split_once(char::is_whitespace)
            .map(|(k, r)| (k, r.trim()))
            .unwrap_or((action, ""));
        match keyword {
            "end" | "else" => return Ok((nodes, Some(action.to_string()))),
            "if" => nodes.push(parse_if(pieces, at, rest)?),
            "range" | "with" => {
                let pipeline = pipeline_of(rest)?;
                let (body, end) = parse_nodes(pieces, at)?;
                let otherwise = match end.as_deref() {
                    Some("end") => Vec::new(),
                    Some("else") => {
                        let (otherwise, end) = parse_nodes(pieces, at)?;
                        if end.as_deref() != Some("end") {
                            return error(format!("{{{{{keyword}}}}} without {{{{end}}}}"));
                        }
                        otherwise
                    }
                    _ => return error(format!("{{{{{keyword}}}}} without {{{{end}}}}")),
                };
                nodes.push(if keyword == "range" {
                    Node::Range(pipeline, body, otherwise)
                } else {
                    Node::With(pipeline, body, otherwise)
                });
            }
            "define" | "template" | "block" | "break" | "continue" => {
                return error(format!(
                    "{{{{{keyword}}}}} is not supported in ClusterClass patches"
                ));
            }
            _ => nodes.push(Node::Action(pipeline_of(action)?)),
        }
    }
    Ok((nodes, None))
}

fn parse_if(pieces: &[Piece], at: &mut usize, condition: &str) -> Result<Node, TemplateError> {
    let mut branches = vec![(pipeline_of(condition)?, Vec::new())];
    loop {
        let (body, end) = parse_nodes(pieces, at)?;
        branches.last_mut().expect("one branch").1 = body;
        match end.as_deref() {
            Some("end") => return Ok(Node::If(branches, Vec::new())),
            Some("else") => {
                let (otherwise, end) = parse_nodes(pieces, at)?;
                if end.as_deref() != Some("end") {
                    return error("{{if}} without {{end}}");
                }
                return Ok(Node::If(branches, otherwise));
            }
            Some(e) if e.starts_with("else if ") => {
                branches.push((pipeline_of(&e["else if ".len()..])?, Vec::new()));
            }
            _ => return error("{{if}} without {{end}}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Execution.

fn execute(
    nodes: &[Node],
    dot: &Data,
    root: &Value,
    out: &mut String,
) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action(p) => out.push_str(&evaluate(p, dot, root)?.printed()),
            Node::If(branches, otherwise) => {
                let mut taken = false;
                for (condition, body) in branches {
                    if evaluate(condition, dot, root)?.truthy() {
                        execute(body, dot, root, out)?;
                        taken = true;
                        break;
                    }
                }
                if !taken {
                    execute(otherwise, dot, root, out)?;
                }
            }
            Node::With(p, body, otherwise) => {
                let value = evaluate(p, dot, root)?;
                if value.truthy() {
                    execute(body, &value, root, out)?;
                } else {
                    execute(otherwise, dot, root, out)?;
                }
            }
            Node::Range(p, body, otherwise) => {
                let items: Vec<Value> = match evaluate(p, dot, root)?.value() {
                    Value::Array(a) => a,
                    Value::Object(o) => {
                        let mut keys: Vec<_> = o.keys().cloned().collect();
                        keys.sort();
                        keys.into_iter().map(|k| o[&k].clone()).collect()
                    }
                    Value::Null => Vec::new(),
                    other => {
                        return error(format!("range can't iterate over {}", print_value(&other)));
                    }
                };
                if items.is_empty() {
                    execute(otherwise, dot, root, out)?;
                }
                for item in items {
                    execute(body, &Data::Value(item), root, out)?;
                }
            }
        }
    }
    Ok(())
}

fn lookup(start: &Data, path: &[String]) -> Data {
    let mut current = start.clone();
    for key in path {
        current = match current {
            Data::Value(Value::Object(map)) => match map.get(key) {
                Some(v) => Data::Value(v.clone()),
                None => Data::Missing,
            },
            _ => Data::Missing,
        };
    }
    current
}

fn evaluate(pipeline: &Pipeline, dot: &Data, root: &Value) -> Result<Data, TemplateError> {
    let mut piped: Option<Data> = None;
    for command in pipeline {
        piped = Some(command_value(command, dot, root, piped)?);
    }
    Ok(piped.unwrap_or(Data::Missing))
}

fn arg_value(arg: &Arg, dot: &Data, root: &Value) -> Result<Data, TemplateError> {
    Ok(match arg {
        Arg::Field(path) => lookup(dot, path),
        Arg::Root(path) => lookup(&Data::Value(root.clone()), path),
        Arg::Literal(v) => Data::Value(v.clone()),
        Arg::Sub(p) => evaluate(p, dot, root)?,
        Arg::Function(name) => call(name, Vec::new())?,
    })
}

fn command_value(
    command: &Command,
    dot: &Data,
    root: &Value,
    piped: Option<Data>,
) -> Result<Data, TemplateError> {
    match command.first() {
        Some(Arg::Function(name)) => {
            let mut args = command[1..]
                .iter()
                .map(|a| arg_value(a, dot, root))
                .collect::<Result<Vec<_>, _>>()?;
            args.extend(piped);
            call(name, args)
        }
        Some(arg) if command.len() == 1 => {
            if piped.is_some() {
                return error("can't give argument to non-function");
            }
            arg_value(arg, dot, root)
        }
        _ => error("can't give argument to non-function"),
    }
}

const FUNCTIONS: &[&str] = &[
    "and",
    "or",
    "not",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "len",
    "index",
    "print",
    "printf",
    "println",
    "replace",
    "semverCompare",
    "default",
    "empty",
    "coalesce",
    "ternary",
    "quote",
    "squote",
    "upper",
    "lower",
    "trim",
    "trimPrefix",
    "trimSuffix",
    "trimAll",
    "contains",
    "hasPrefix",
    "hasSuffix",
    "toString",
    "toJson",
    "toYaml",
    "join",
    "split",
    "list",
    "dict",
    "indent",
    "nindent",
    "int",
    "atoi",
    "add",
    "sub",
    "mul",
    "div",
    "mod",
    "max",
    "min",
    "b64enc",
    "b64dec",
    "repeat",
    "substr",
    "trunc",
    "has",
    "hasKey",
    "keys",
];

fn is_function(name: &str) -> bool {
    FUNCTIONS.contains(&name)
}

fn text(d: &Data) -> String {
    match d {
        Data::Value(Value::String(s)) => s.clone(),
        other => other.printed(),
    }
}

fn number(d: &Data) -> Result<f64, TemplateError> {
    match d.value() {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Ok(s.trim().parse().unwrap_or(0.0)),
        Value::Bool(b) => Ok(if b { 1.0 } else { 0.0 }),
        Value::Null => Ok(0.0),
        other => error(format!("{} is not a number", print_value(&other))),
    }
}

fn integer(v: f64) -> Data {
    Data::Value(serde_json::json!(v.trunc() as i64))
}

fn arity(name: &str, args: &[Data], n: usize) -> Result<(), TemplateError> {
    if args.len() != n {
        return error(format!(
            "wrong number of args for {name}: want {n} got {}",
            args.len()
        ));
    }
    Ok(())
}

fn compare(name: &str, a: &Data, b: &Data) -> Result<std::cmp::Ordering, TemplateError> {
    match (a.value(), b.value()) {
        (Value::Number(x), Value::Number(y)) => Ok(x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(std::cmp::Ordering::Equal)),
        (Value::String(x), Value::String(y)) => Ok(x.cmp(&y)),
        (x, y) => error(format!(
            "error calling {name}: incompatible types for comparison: {} and {}",
            print_value(&x),
            print_value(&y)
        )),
    }
}

fn printf(format: &str, args: &[Data]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(verb) => {
                let Some(arg) = args.next() else {
                    out.push_str(&format!("%!{verb}(MISSING)"));
                    continue;
                };
                match verb {
                    'q' => out.push_str(&serde_json::to_string(&text(arg)).unwrap_or_default()),
                    'd' => out.push_str(&format!("{}", number(arg).unwrap_or(0.0) as i64)),
                    _ => out.push_str(&text(arg)),
                }
            }
            None => out.push_str("%!(NOVERB)"),
        }
    }
    out
}

fn call(name: &str, args: Vec<Data>) -> Result<Data, TemplateError> {
    use base64::Engine;
    let value = |v: Value| Ok(Data::Value(v));
    let string = |s: String| Ok(Data::Value(Value::String(s)));
    let boolean = |b: bool| Ok(Data::Value(Value::Bool(b)));
    match name {
        "and" => Ok(args
            .iter()
            .find(|a| !a.truthy())
            .or(args.last())
            .cloned()
            .unwrap_or(Data::Missing)),
        "or" => Ok(args
            .iter()
            .find(|a| a.truthy())
            .or(args.last())
            .cloned()
            .unwrap_or(Data::Missing)),
        "not" => {
            arity(name, &args, 1)?;
            boolean(!args[0].truthy())
        }
        "eq" => {
            if args.len() < 2 {
                return error("missing argument for comparison");
            }
            boolean(args[1..].iter().any(|b| args[0].value() == b.value()))
        }
        "ne" => {
            arity(name, &args, 2)?;
            boolean(args[0].value() != args[1].value())
        }
        "lt" | "le" | "gt" | "ge" => {
            arity(name, &args, 2)?;
            let order = compare(name, &args[0], &args[1])?;
            boolean(match name {
                "lt" => order.is_lt(),
                "le" => order.is_le(),
                "gt" => order.is_gt(),
                _ => order.is_ge(),
            })
        }
        "len" => {
            arity(name, &args, 1)?;
            let n = match args[0].value() {
                Value::String(s) => s.len(),
                Value::Array(a) => a.len(),
                Value::Object(o) => o.len(),
                other => return error(format!("len of {}", print_value(&other))),
            };
            value(serde_json::json!(n))
        }
        "index" => {
            let mut current = args.first().cloned().unwrap_or(Data::Missing);
            for key in args.iter().skip(1) {
                current = match (current.value(), key.value()) {
                    (Value::Array(a), Value::Number(i)) => a
                        .get(i.as_u64().unwrap_or(u64::MAX) as usize)
                        .cloned()
                        .map(Data::Value)
                        .ok_or_else(|| TemplateError(format!("index out of range: {i}")))?,
                    (Value::Object(o), Value::String(k)) => {
                        o.get(&k).cloned().map(Data::Value).unwrap_or(Data::Missing)
                    }
                    (_, k) => return error(format!("can't index item with {}", print_value(&k))),
                };
            }
            Ok(current)
        }
        "print" => string(args.iter().map(text).collect::<Vec<_>>().join("")),
        "println" => string(format!(
            "{}\n",
            args.iter().map(text).collect::<Vec<_>>().join(" ")
        )),
        "printf" => {
            let format = args.first().map(text).unwrap_or_default();
            string(printf(&format, &args[1.min(args.len())..]))
        }
        "replace" => {
            arity(name, &args, 3)?;
            string(text(&args[2]).replace(&text(&args[0]), &text(&args[1])))
        }
        "semverCompare" => {
            arity(name, &args, 2)?;
            boolean(semver_compare(&text(&args[0]), &text(&args[1]))?)
        }
        "default" => {
            let given = args.get(1).filter(|v| v.truthy());
            Ok(given.or(args.first()).cloned().unwrap_or(Data::Missing))
        }
        "empty" => {
            arity(name, &args, 1)?;
            boolean(!args[0].truthy())
        }
        "coalesce" => Ok(args
            .iter()
            .find(|a| a.truthy())
            .cloned()
            .unwrap_or(Data::Missing)),
        "ternary" => {
            arity(name, &args, 3)?;
            Ok(if args[2].truthy() {
                args[0].clone()
            } else {
                args[1].clone()
            })
        }
        "quote" => string(
            args.iter()
                .filter(|a| **a != Data::Missing)
                .map(|a| serde_json::to_string(&text(a)).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "squote" => string(
            args.iter()
                .filter(|a| **a != Data::Missing)
                .map(|a| format!("'{}'", text(a)))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "upper" | "lower" | "trim" | "toString" | "b64enc" | "b64dec" => {
            arity(name, &args, 1)?;
            let s = text(&args[0]);
            string(match name {
                "upper" => s.to_uppercase(),
                "lower" => s.to_lowercase(),
                "trim" => s.trim().to_string(),
                "b64enc" => base64::engine::general_purpose::STANDARD.encode(s),
                "b64dec" => base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .unwrap_or_default(),
                _ => s,
            })
        }
        "trimPrefix" | "trimSuffix" | "trimAll" | "contains" | "hasPrefix" | "hasSuffix"
        | "repeat" => {
            arity(name, &args, 2)?;
            let (a, s) = (text(&args[0]), text(&args[1]));
            match name {
                "trimPrefix" => string(s.strip_prefix(a.as_str()).unwrap_or(&s).to_string()),
                "trimSuffix" => string(s.strip_suffix(a.as_str()).unwrap_or(&s).to_string()),
                "trimAll" => string(s.trim_matches(|c| a.contains(c)).to_string()),
                "contains" => boolean(s.contains(&a)),
                "hasPrefix" => boolean(s.starts_with(&a)),
                "hasSuffix" => boolean(s.ends_with(&a)),
                _ => string(s.repeat(number(&args[0])?.max(0.0) as usize)),
            }
        }
        "toJson" => {
            arity(name, &args, 1)?;
            string(serde_json::to_string(&args[0].value()).unwrap_or_default())
        }
        "toYaml" => {
            arity(name, &args, 1)?;
            string(
                crate::yaml::to_string(&args[0].value())
                    .unwrap_or_default()
                    .trim_end()
                    .to_string(),
            )
        }
        "join" => {
            arity(name, &args, 2)?;
            let items = match args[1].value() {
                Value::Array(a) => a.iter().map(print_value).collect::<Vec<_>>(),
                other => vec![print_value(&other)],
            };
            string(items.join(&text(&args[0])))
        }
        "split" => {
            arity(name, &args, 2)?;
            let parts: serde_json::Map<String, Value> = text(&args[1])
                .split(text(&args[0]).as_str())
                .enumerate()
                .map(|(i, p)| (format!("_{i}"), Value::String(p.to_string())))
                .collect();
            value(Value::Object(parts))
        }
        "list" => value(Value::Array(args.iter().map(Data::value).collect())),
        "dict" => {
            let mut map = serde_json::Map::new();
            for pair in args.chunks(2) {
                map.insert(
                    text(&pair[0]),
                    pair.get(1).map(Data::value).unwrap_or_default(),
                );
            }
            value(Value::Object(map))
        }
        "has" => {
            arity(name, &args, 2)?;
            boolean(match args[1].value() {
                Value::Array(a) => a.contains(&args[0].value()),
                _ => false,
            })
        }
        "hasKey" => {
            arity(name, &args, 2)?;
            boolean(match args[0].value() {
                Value::Object(o) => o.contains_key(&text(&args[1])),
                _ => false,
            })
        }
        "keys" => {
            let mut keys: Vec<Value> = args
                .iter()
                .filter_map(|a| match a.value() {
                    Value::Object(o) => {
                        Some(o.keys().cloned().map(Value::String).collect::<Vec<_>>())
                    }
                    _ => None,
                })
                .flatten()
                .collect();
            keys.sort_by_key(print_value);
            value(Value::Array(keys))
        }
        "indent" | "nindent" => {
            arity(name, &args, 2)?;
            let pad = " ".repeat(number(&args[0])?.max(0.0) as usize);
            let indented = text(&args[1])
                .split('\n')
                .map(|l| format!("{pad}{l}"))
                .collect::<Vec<_>>()
                .join("\n");
            string(if name == "nindent" {
                format!("\n{indented}")
            } else {
                indented
            })
        }
        "substr" => {
            arity(name, &args, 3)?;
            let s: Vec<char> = text(&args[2]).chars().collect();
            let start = (number(&args[0])?.max(0.0) as usize).min(s.len());
            let end = number(&args[1])?;
            let end = if end < 0.0 {
                s.len()
            } else {
                (end as usize).min(s.len())
            };
            string(s[start..end.max(start)].iter().collect())
        }
        "trunc" => {
            arity(name, &args, 2)?;
            let s: Vec<char> = text(&args[1]).chars().collect();
            let n = number(&args[0])?;
            string(if n >= 0.0 {
                s[..(n as usize).min(s.len())].iter().collect()
            } else {
                s[s.len().saturating_sub((-n) as usize)..].iter().collect()
            })
        }
        "int" | "atoi" => {
            arity(name, &args, 1)?;
            Ok(integer(number(&args[0])?))
        }
        "add" | "mul" | "max" | "min" => {
            let numbers = args.iter().map(number).collect::<Result<Vec<_>, _>>()?;
            let start = match name {
                "add" => 0.0,
                "mul" => 1.0,
                "max" => f64::MIN,
                _ => f64::MAX,
            };
            Ok(integer(numbers.into_iter().fold(
                start,
                |acc, n| match name {
                    "add" => acc + n,
                    "mul" => acc * n,
                    "max" => acc.max(n),
                    _ => acc.min(n),
                },
            )))
        }
        "sub" | "div" | "mod" => {
            arity(name, &args, 2)?;
            let (a, b) = (number(&args[0])?.trunc(), number(&args[1])?.trunc());
            if name != "sub" && b == 0.0 {
                return error(format!("error calling {name}: integer divide by zero"));
            }
            Ok(integer(match name {
                "sub" => a - b,
                "div" => a / b,
                _ => a % b,
            }))
        }
        other => error(format!("function {other:?} not defined")),
    }
}

// ---------------------------------------------------------------------------------------------
// Semantic versions, as sprig's semverCompare (Masterminds/semver) reads them.

/// A version: major, minor, patch, and its pre-release identifiers (build metadata dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    core: (u64, u64, u64),
    pre: Vec<String>,
}

fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim().trim_start_matches('v');
    let text = text.split('+').next()?;
    let (core, pre) = match text.split_once('-') {
        Some((c, p)) => (c, p.split('.').map(str::to_string).collect()),
        None => (text, Vec::new()),
    };
    let mut parts = core.split('.');
    let number = |p: Option<&str>| -> Option<u64> {
        match p {
            None => Some(0),
            Some(p) => p.parse().ok(),
        }
    };
    let version = Version {
        core: (
            number(parts.next())?,
            number(parts.next())?,
            number(parts.next())?,
        ),
        pre,
    };
    parts.next().is_none().then_some(version)
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let order = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            _ => a.cmp(b),
                        };
                        if order != Ordering::Equal {
                            return order;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

/// Whether `version` meets `constraint` (`< v1.25-0`, `>= 1.24, < 1.26`, `~1.30`, `^1.2`,
/// `1.2.x`, alternatives joined by `||`).
pub fn semver_compare(constraint: &str, version: &str) -> Result<bool, TemplateError> {
    let Some(v) = parse_version(version) else {
        return error(format!("Invalid Semantic Version: {version:?}"));
    };
    for alternative in constraint.split("||") {
        let mut all = true;
        for part in alternative
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            if !meets(part, &v)? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

fn meets(part: &str, v: &Version) -> Result<bool, TemplateError> {
    let operators = [">=", "<=", "!=", "=>", "=<", ">", "<", "=", "~>", "~", "^"];
    let (op, rest) = operators
        .iter()
        .find_map(|op| part.strip_prefix(op).map(|r| (*op, r.trim())))
        .unwrap_or(("", part));
    // `1.2.x` / `1.2.*` / `1.2`: a wildcard where parts are missing.
    let given: Vec<&str> = rest
        .trim_start_matches('v')
        .split(['-', '+'])
        .next()
        .unwrap_or("")
        .split('.')
        .collect();
    let wildcard = given.len() < 3 || given.iter().any(|p| *p == "x" || *p == "X" || *p == "*");
    let cleaned = rest
        .split('.')
        .map(|p| {
            if p == "x" || p == "X" || p == "*" {
                "0"
            } else {
                p
            }
        })
        .collect::<Vec<_>>()
        .join(".");
    let Some(c) = parse_version(&cleaned) else {
        return error(format!("improper constraint: {part}"));
    };
    // A pre-release version meets a constraint only when the constraint names a pre-release.
    if !v.pre.is_empty() && c.pre.is_empty() {
        return Ok(false);
    }
    let fixed = given
        .iter()
        .take_while(|p| !matches!(**p, "x" | "X" | "*"))
        .count();
    let upper = |level: usize| -> Version {
        let (ma, mi, _) = c.core;
        Version {
            core: match level {
                0 => (ma + 1, 0, 0),
                1 => (ma, mi + 1, 0),
                _ => (ma, mi, c.core.2 + 1),
            },
            pre: Vec::new(),
        }
    };
    Ok(match op {
        "" | "=" if wildcard => *v >= c && *v < upper(fixed.saturating_sub(1).min(2)),
        "" | "=" => *v == c,
        "!=" => *v != c,
        ">" if wildcard => *v >= upper(fixed.saturating_sub(1).min(2)),
        ">" => *v > c,
        "<" => *v < c,
        ">=" | "=>" => *v >= c,
        "<=" | "=<" if wildcard => *v < upper(fixed.saturating_sub(1).min(2)),
        "<=" | "=<" => *v <= c,
        "~" | "~>" => *v >= c && *v < upper(if fixed <= 1 { 0 } else { 1 }),
        "^" => {
            let level = if c.core.0 > 0 || fixed <= 1 {
                0
            } else if c.core.1 > 0 || fixed == 2 {
                1
            } else {
                2
            };
            *v >= c && *v < upper(level)
        }
        _ => return error(format!("improper constraint: {part}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_upstream_class_templates_render() {
        let data = json!({
            "imageRepository": "",
            "etcdImageTag": "3.5.3-0",
            "podSecurityStandard": {"enabled": true, "enforce": "baseline"},
            "builtin": {"controlPlane": {"version": "v1.30.4+k3s1"}, "machineDeployment": {"version": "v1.24.2"}},
        });
        for (template, want) in [
            (r#"{{ ne .imageRepository "" }}"#, "false"),
            (r#"{{ ne .etcdImageTag "" }}"#, "true"),
            ("{{ .podSecurityStandard.enabled }}", "true"),
            (
                r#"kindest/node:{{ .builtin.controlPlane.version | replace "+" "_" }}"#,
                "kindest/node:v1.30.4_k3s1",
            ),
            (
                r#"v1{{ if semverCompare "< v1.25-0" .builtin.machineDeployment.version }}beta1{{ end }}"#,
                "v1beta1",
            ),
            (
                r#"v1{{ if semverCompare "< v1.25-0" .builtin.controlPlane.version }}beta1{{ end }}"#,
                "v1",
            ),
            ("imageTag: {{ .etcdImageTag }}", "imageTag: 3.5.3-0"),
            ("{{ .nope }}", "<no value>"),
            ("{{ .podSecurityStandard.nope }}", "<no value>"),
            ("a  {{- \" b \" -}}  c", "a b c"),
            (
                "{{ if .imageRepository }}x{{ else if .etcdImageTag }}y{{ else }}z{{ end }}",
                "y",
            ),
            (
                "{{ with .podSecurityStandard }}{{ .enforce }}{{ end }}",
                "baseline",
            ),
            (r#"{{ printf "%s-%d" "a" 3 }}"#, "a-3"),
            (r#"{{ default "dflt" .imageRepository }}"#, "dflt"),
            (r#"{{ .etcdImageTag | quote }}"#, "\"3.5.3-0\""),
            (r#"{{ and true (not false) }}"#, "true"),
            ("{{ range list 1 2 3 }}{{ . }},{{ end }}", "1,2,3,"),
            ("{{ $.etcdImageTag }}", "3.5.3-0"),
            (
                "{{ toJson .podSecurityStandard }}",
                r#"{"enabled":true,"enforce":"baseline"}"#,
            ),
            ("{{/* a comment */}}x", "x"),
        ] {
            assert_eq!(render(template, &data).unwrap(), want, "{template}");
        }
    }

    #[test]
    fn templates_that_do_not_parse_say_why() {
        for (template, want) in [
            ("{{ .a ", "unclosed action"),
            ("{{ if .a }}x", "{{if}} without {{end}}"),
            ("{{ nope .a }}", "function \"nope\" not defined"),
            ("{{ end }}", "unexpected {{end}}"),
            ("{{ (eq .a }}", "unclosed \"(\""),
        ] {
            let e = check(template).unwrap_err().to_string();
            assert!(e.contains(want), "{template}: {e}");
        }
    }

    #[test]
    fn semantic_version_constraints_as_sprig() {
        for (constraint, version, want) in [
            ("< v1.25-0", "v1.24.9", true),
            ("< v1.25-0", "v1.25.0", false),
            ("< v1.25-0", "v1.25.0-rc.1", false),
            ("< v1.25-0", "v1.24.0-rc.1", true),
            (">= 1.24, < 1.26", "v1.25.3", true),
            (">= 1.24, < 1.26", "v1.26.0", false),
            ("~1.30", "v1.30.9", true),
            ("~1.30", "v1.31.0", false),
            ("^1.2", "v1.9.0", true),
            ("^1.2", "v2.0.0", false),
            ("1.30.x", "v1.30.4", true),
            ("1.30.x", "v1.31.4", false),
            ("= 1.30.4", "v1.30.4+k3s1", true),
            ("< 1.20 || >= 1.30", "v1.30.1", true),
            (">= 1.20", "v1.30.0-alpha.1", false),
        ] {
            assert_eq!(
                semver_compare(constraint, version).unwrap(),
                want,
                "{constraint} {version}"
            );
        }
        assert!(semver_compare("< 1.2", "not-a-version").is_err());
    }
}
