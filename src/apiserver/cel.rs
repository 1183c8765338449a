//! CEL validation rules (`x-kubernetes-validations`) of CRD schemas, checked as kube-apiserver
//! checks them: when a CRD is written every rule must compile and stay within a cost budget,
//! and when an object is written every rule runs with `self` bound to the value at its node
//! (and `oldSelf` to the stored value there, on updates, for transition rules).
//!
//! Programs are compiled once per rule text and shared; the environment is CEL's standard
//! library with the strings, lists and math extensions Kubernetes also offers.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr, IdedExpr};
use cel::{Context, Env, Program, Value as CelValue};
use serde_json::Value;

/// kube-apiserver's per-rule cost limit, in iterations: a rule whose comprehensions could
/// together run more often than this on the largest value its schema allows is refused when
/// the CRD is written, so no object a client sends can make a rule run without bound.
const COST_LIMIT: u64 = 1_000_000;

/// At most this many distinct rule texts keep a compiled program; beyond it the cache starts
/// afresh, so CRDs written and deleted in a loop cannot grow memory without bound.
const PROGRAM_CACHE_LIMIT: usize = 4096;

static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    for extension in [
        cel::extensions::strings as fn(&mut Env) -> _,
        cel::extensions::lists,
        cel::extensions::math,
    ] {
        env.add_extension(extension)
            .expect("CEL's own extensions declare without conflict");
    }
    Arc::new(env)
});

type Compiled = Result<Arc<Program>, String>;

static PROGRAMS: LazyLock<Mutex<HashMap<String, Compiled>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn program(source: &str) -> Compiled {
    if let Some(compiled) = PROGRAMS.lock().unwrap().get(source) {
        return compiled.clone();
    }
    let compiled = ENV
        .compile(source)
        .map(Arc::new)
        .map_err(|e| format!("compilation failed: {e}"));
    let mut programs = PROGRAMS.lock().unwrap();
    if programs.len() >= PROGRAM_CACHE_LIMIT {
        programs.clear();
    }
    programs.insert(source.to_string(), compiled.clone());
    compiled
}

/// One entry of `x-kubernetes-validations`.
#[derive(Debug)]
pub struct Rule<'a> {
    pub rule: &'a str,
    message: Option<&'a str>,
    message_expression: Option<&'a str>,
    /// A path below the rule's node (`.spec.x`), for the failure's field.
    pub field_path: Option<&'a str>,
    reason: Option<&'a str>,
}

impl<'a> Rule<'a> {
    /// The rules a schema node carries; entries without a `rule` are skipped (the CRD check
    /// reports them).
    pub fn all(schema: &'a Value) -> impl Iterator<Item = Rule<'a>> {
        schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                Some(Rule {
                    rule: entry.get("rule")?.as_str()?,
                    message: entry.get("message").and_then(Value::as_str),
                    message_expression: entry.get("messageExpression").and_then(Value::as_str),
                    field_path: entry.get("fieldPath").and_then(Value::as_str),
                    reason: entry.get("reason").and_then(Value::as_str),
                })
            })
    }

    /// The `FieldCause` reason a failure carries, kube-apiserver's `FieldValueInvalid` unless
    /// the rule names another.
    pub fn reason(&self) -> &'static str {
        match self.reason {
            Some("FieldValueForbidden") => "FieldValueForbidden",
            Some("FieldValueRequired") => "FieldValueRequired",
            Some("FieldValueDuplicate") => "FieldValueDuplicate",
            _ => "FieldValueInvalid",
        }
    }

    /// Runs the rule; `Err` carries the message to show when it does not hold. A transition
    /// rule (one naming `oldSelf`) holds where there is no stored value to compare with: on
    /// creates, and for new list items.
    pub fn check(&self, this: &Value, old: Option<&Value>) -> Result<(), String> {
        let program = program(self.rule)?;
        let transition = program.references().has_variable("oldSelf");
        let old = match old {
            None if transition => return Ok(()),
            _ => old.filter(|_| transition),
        };
        let mut context = Context::with_env(ENV.clone());
        bind(&mut context, "self", this)?;
        if let Some(old) = old {
            bind(&mut context, "oldSelf", old)?;
        }
        match program.execute(&context) {
            Ok(CelValue::Bool(true)) => Ok(()),
            Ok(CelValue::Bool(false)) => Err(self.failure_message(&context)),
            Ok(other) => Err(format!(
                "rule {:?} gave {other:?}, not a boolean",
                self.rule
            )),
            Err(e) => Err(format!("{e} evaluating rule: {}", self.rule)),
        }
    }

    fn failure_message(&self, context: &Context) -> String {
        if let Some(expression) = self.message_expression
            && let Ok(program) = program(expression)
            && let Ok(CelValue::String(message)) = program.execute(context)
            && !message.trim().is_empty()
        {
            return message.to_string();
        }
        match self.message {
            Some(message) => message.to_string(),
            None => format!("failed rule: {}", self.rule),
        }
    }
}

/// Evaluates a boolean expression with the given variables bound (an admission webhook's
/// `matchConditions`, which see `object`, `oldObject` and `request`).
pub fn holds(expression: &str, variables: &[(&str, &Value)]) -> Result<bool, String> {
    let program = program(expression)?;
    let mut context = Context::with_env(ENV.clone());
    for (name, value) in variables {
        bind(&mut context, name, value)?;
    }
    match program.execute(&context) {
        Ok(CelValue::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("{expression:?} gave {other:?}, not a boolean")),
        Err(e) => Err(format!("{e} evaluating {expression:?}")),
    }
}

fn bind(context: &mut Context, name: &str, value: &Value) -> Result<(), String> {
    let value = cel::to_value(value).map_err(|e| format!("{name} cannot be given to CEL: {e}"))?;
    context.add_variable_from_value(name, value);
    Ok(())
}

/// How deeply the program's comprehensions (`all`, `exists`, `map`, `filter`...) nest.
fn comprehension_depth(expr: &IdedExpr) -> u32 {
    let children: Vec<&IdedExpr> = match &expr.expr {
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Comprehension(c) => {
            return 1 + [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .map(comprehension_depth)
            .max()
            .unwrap_or(0);
        }
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entry_values(&map.entries),
        Expr::Struct(s) => entry_values(&s.entries),
        Expr::Select(select) => vec![&*select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    children
        .into_iter()
        .map(comprehension_depth)
        .max()
        .unwrap_or(0)
}

/// The expressions in the entries of a map or message literal.
fn entry_values(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
            EntryExpr::StructField(field) => vec![&field.value],
        })
        .collect()
}

/// What is wrong with the rules of a CRD schema, at every level: rules that do not compile,
/// entries without a rule, and rules whose nested comprehensions over lists without a
/// `maxItems` bound (or with too large a one) could exceed [`COST_LIMIT`].
pub fn rule_problems(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    rule_problems_at(schema, "", &mut out);
    out
}

fn rule_problems_at(schema: &Value, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    if let Some(entries) = schema.get("x-kubernetes-validations") {
        let Some(entries) = entries.as_array() else {
            out.push(format!("{at}.x-kubernetes-validations: must be a list"));
            return;
        };
        for (i, entry) in entries.iter().enumerate() {
            let field = format!("{at}.x-kubernetes-validations[{i}]");
            let Some(rule) = entry.get("rule").and_then(Value::as_str) else {
                out.push(format!("{field}.rule: Required value"));
                continue;
            };
            match program(rule) {
                Err(e) => out.push(format!("{field}.rule: Invalid value: {rule:?}: {e}")),
                Ok(compiled) => {
                    let depth = comprehension_depth(compiled.expression());
                    if depth >= 2 {
                        let bound = schema.get("maxItems").and_then(Value::as_u64);
                        let cost = bound.map(|n| n.saturating_pow(depth));
                        if cost.is_none_or(|c| c > COST_LIMIT) {
                            out.push(format!(
                                "{field}.rule: Forbidden: estimated rule cost exceeds budget: \
                                 {depth} nested comprehensions need a maxItems on this list \
                                 small enough that maxItems^{depth} is at most {COST_LIMIT}"
                            ));
                        }
                    }
                }
            }
            if let Some(expression) = entry.get("messageExpression").and_then(Value::as_str)
                && let Err(e) = program(expression)
            {
                out.push(format!(
                    "{field}.messageExpression: Invalid value: {expression:?}: {e}"
                ));
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let sub = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            rule_problems_at(v, &sub, out);
        }
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        rule_problems_at(extra, &format!("{path}.additionalProperties"), out);
    }
    if let Some(items) = schema.get("items") {
        rule_problems_at(items, &format!("{path}.items"), out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(text: &str, message: Option<&str>) -> Value {
        let mut entry = json!({ "rule": text });
        if let Some(m) = message {
            entry["message"] = json!(m);
        }
        entry
    }

    fn check(entry: &Value, this: Value) -> Result<(), String> {
        let schema = json!({ "x-kubernetes-validations": [entry] });
        Rule::all(&schema).next().unwrap().check(&this, None)
    }

    #[test]
    fn upstream_rules_hold_and_fail_as_upstream_says() {
        let unique = rule(
            "self.all(x, self.exists_one(y, x.name == y.name))",
            Some("extraArgs name must be unique"),
        );
        let reserved = rule(
            "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])",
            None,
        );
        let one_of = rule(
            "[has(self.layout),has(self.diskLayout)].filter(x,x==true).size() == 1",
            None,
        );
        let partition = rule(
            "self.matches('^(Linux|LinuxSwap|[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12})$')",
            None,
        );
        let cases = [
            (
                &unique,
                json!([{"name": "a", "value": "1"}, {"name": "b", "value": "1"}]),
                true,
            ),
            (
                &unique,
                json!([{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]),
                false,
            ),
            (&reserved, json!("DiskPressure"), true),
            (&reserved, json!("Ready"), false),
            (&one_of, json!({"device": "/dev/sda", "layout": true}), true),
            (&one_of, json!({"device": "/dev/sda"}), false),
            (
                &one_of,
                json!({"device": "/dev/sda", "layout": true, "diskLayout": []}),
                false,
            ),
            (&partition, json!("LinuxSwap"), true),
            (
                &partition,
                json!("0FC63DAF-8483-4772-8E79-3D69D8477DE4"),
                true,
            ),
            (&partition, json!("Swap"), false),
        ];
        for (entry, this, holds) in cases {
            assert_eq!(
                check(entry, this.clone()).is_ok(),
                holds,
                "{entry} on {this}"
            );
        }
    }

    #[test]
    fn a_failure_says_the_message_or_the_rule() {
        assert_eq!(
            check(&rule("self > 1", Some("must be more than one")), json!(1)),
            Err("must be more than one".to_string())
        );
        assert_eq!(
            check(&rule("self > 1", None), json!(1)),
            Err("failed rule: self > 1".to_string())
        );
        let expressed = json!({"rule": "self > 1", "messageExpression": "'got ' + string(self)"});
        assert_eq!(check(&expressed, json!(1)), Err("got 1".to_string()));
        // A missing field is an evaluation error, reported with the rule.
        let err = check(&rule("self.missing == 1", None), json!({})).unwrap_err();
        assert!(err.contains("self.missing == 1"), "{err}");
    }

    #[test]
    fn transition_rules_are_known_by_their_old_self() {
        let schema = json!({ "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "is immutable"},
            {"rule": "self != ''"},
        ]});
        let rules: Vec<Rule> = Rule::all(&schema).collect();
        // A transition rule holds with nothing to compare with; the others run on updates too.
        assert_eq!(rules[0].check(&json!("b"), None), Ok(()));
        assert!(rules[1].check(&json!(""), Some(&json!("a"))).is_err());
        assert_eq!(rules[0].check(&json!("a"), Some(&json!("a"))), Ok(()));
        assert_eq!(
            rules[0].check(&json!("b"), Some(&json!("a"))),
            Err("is immutable".to_string())
        );
    }

    #[test]
    fn crds_with_rules_that_cannot_run_or_cost_too_much_are_named() {
        let schema = json!({
            "type": "object",
            "properties": {
                "bad": {"type": "string", "x-kubernetes-validations": [{"rule": "self ==="}]},
                "unbounded": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x != y))"}]},
                "bounded": {"type": "array", "maxItems": 100, "items": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x == y))"}]},
                "flat": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "self.all(x, x != '')"}]},
            }
        });
        let problems = rule_problems(&schema);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].starts_with("bad.x-kubernetes-validations[0].rule: Invalid value"));
        assert!(problems[1].starts_with("unbounded.x-kubernetes-validations[0].rule: Forbidden"));
    }
}
