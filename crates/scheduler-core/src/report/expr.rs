//! The expression language of `request-attribute-reporter`: the subset of CEL (Common
//! Expression Language) that upstream's examples use, over one variable, `usage`.
//!
//! Supported, and nothing else (anything outside is refused when the config loads, with the
//! list below in the message):
//!
//! - numbers (`0`, `1.5`; integers and decimals are one number type), strings (`'a'`, `"a"`),
//!   `true`, `false`, `null`;
//! - field selection on `usage`: `usage.prompt_tokens`, `usage.prompt_tokens_details.cached_tokens`;
//! - `has(usage.FIELD…)`: whether the field is present;
//! - arithmetic `+ - * / %`, unary `-`; comparison `== != < <= > >=`; logic `&& || !`;
//!   the conditional `c ? a : b`; parentheses.
//!
//! An expression is at most [`MAX_EXPRESSION_BYTES`] long, nests at most [`MAX_DEPTH`] levels
//! and has at most [`MAX_OPERATORS`] binary operators, so parsing and evaluation use bounded stack and time. Evaluation
//! never panics: a missing field without `has()`, a type mismatch or a division by zero is an
//! [`EvalError`].
//!
//! ```
//! use shepherd_scheduler_core::report::expr::{Expr, Value};
//!
//! let expr = Expr::parse(
//!     "(has(usage.prompt_tokens) ? usage.prompt_tokens : 0) + \
//!      (has(usage.completion_tokens) ? usage.completion_tokens : 0)",
//! )?;
//! let usage = Value::object([("prompt_tokens", Value::Number(7.0)), ("completion_tokens", Value::Number(3.0))]);
//! assert_eq!(expr.eval(&usage), Ok(Value::Number(10.0)));
//! assert!(Expr::parse("size(usage)").is_err()); // functions other than has() are refused
//! # Ok::<(), shepherd_scheduler_core::report::expr::ExprError>(())
//! ```

use std::fmt;

use thiserror::Error;

/// Longest expression accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 4096;
/// Deepest nesting accepted (parentheses, unary operators, conditionals).
pub const MAX_DEPTH: usize = 32;
/// Most binary operators in one expression (evaluation recurses once per operator).
pub const MAX_OPERATORS: usize = 256;

/// What the supported subset is, for error messages.
pub const SUPPORTED: &str = "supported: numbers, 'strings', true, false, null, `usage.FIELD` \
     paths, has(usage.FIELD), + - * / %, unary -, == != < <= > >=, && || !, c ? a : b, \
     parentheses";

/// An expression that is not in the supported subset.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message} at byte {at} ({SUPPORTED})")]
pub struct ExprError {
    /// What is wrong.
    pub message: String,
    /// Where, in bytes from the start.
    pub at: usize,
}

/// Why an expression gave no value for a response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A field was selected that the value does not have (guard it with `has()`).
    #[error("no such field `{0}`")]
    NoSuchField(String),
    /// An operator was applied to values of the wrong types.
    #[error("`{op}` does not apply to {left} and {right}")]
    Types {
        /// The operator.
        op: &'static str,
        /// The left (or only) operand's type.
        left: &'static str,
        /// The right operand's type (empty for a unary operator).
        right: &'static str,
    },
    /// Division or remainder by zero.
    #[error("division by zero")]
    DivisionByZero,
}

/// A value an expression works on.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number (CEL's ints and doubles are one type here).
    Number(f64),
    /// A string.
    String(String),
    /// An object: field names and values, in order.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// An object of `fields`.
    pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Object(_) => "object",
        }
    }

    fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr(Node);

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Literal(Value),
    /// `usage` followed by these field names.
    Path(Vec<String>),
    Has(Vec<String>),
    Not(Box<Node>),
    Neg(Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// The variable every path starts from.
pub const VARIABLE: &str = "usage";

impl Expr {
    /// Parses `text`; an expression outside the supported subset is an [`ExprError`].
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        if text.len() > MAX_EXPRESSION_BYTES {
            return Err(ExprError {
                message: format!(
                    "the expression is {} bytes, more than {MAX_EXPRESSION_BYTES}",
                    text.len()
                ),
                at: 0,
            });
        }
        let tokens = lex(text)?;
        let mut parser = Parser {
            tokens,
            pos: 0,
            depth: 0,
            operators: 0,
            end: text.len(),
        };
        let node = parser.conditional()?;
        match parser.peek() {
            None => Ok(Expr(node)),
            Some((_, at)) => Err(ExprError {
                message: "unexpected text after the expression".into(),
                at,
            }),
        }
    }

    /// Evaluates the expression with `usage` bound to `usage`.
    pub fn eval(&self, usage: &Value) -> Result<Value, EvalError> {
        eval(&self.0, usage)
    }
}

fn eval(node: &Node, usage: &Value) -> Result<Value, EvalError> {
    Ok(match node {
        Node::Literal(v) => v.clone(),
        Node::Path(path) => {
            let mut value = usage;
            for name in path {
                value = value
                    .field(name)
                    .ok_or_else(|| EvalError::NoSuchField(name.clone()))?;
            }
            value.clone()
        }
        Node::Has(path) => {
            let mut value = Some(usage);
            for name in path {
                value = value.and_then(|v| v.field(name));
            }
            Value::Bool(value.is_some())
        }
        Node::Not(inner) => match eval(inner, usage)? {
            Value::Bool(b) => Value::Bool(!b),
            other => return Err(unary_error("!", &other)),
        },
        Node::Neg(inner) => match eval(inner, usage)? {
            Value::Number(n) => Value::Number(-n),
            other => return Err(unary_error("-", &other)),
        },
        Node::Cond(cond, then, otherwise) => match eval(cond, usage)? {
            Value::Bool(true) => eval(then, usage)?,
            Value::Bool(false) => eval(otherwise, usage)?,
            other => return Err(unary_error("?:", &other)),
        },
        Node::Binary(op @ (BinOp::Or | BinOp::And), left, right) => {
            // Short-circuit, as CEL does for a decided left side.
            let l = eval(left, usage)?;
            match (op, &l) {
                (BinOp::Or, Value::Bool(true)) => return Ok(Value::Bool(true)),
                (BinOp::And, Value::Bool(false)) => return Ok(Value::Bool(false)),
                _ => {}
            }
            let r = eval(right, usage)?;
            match (&l, &r) {
                (Value::Bool(_), Value::Bool(b)) => Value::Bool(*b),
                _ => return Err(binary_error(*op, &l, &r)),
            }
        }
        Node::Binary(op, left, right) => {
            let l = eval(left, usage)?;
            let r = eval(right, usage)?;
            binary(*op, &l, &r)?
        }
    })
}

fn binary(op: BinOp, l: &Value, r: &Value) -> Result<Value, EvalError> {
    use BinOp::*;
    match (op, l, r) {
        (Eq, _, _) => Ok(Value::Bool(l == r)),
        (Ne, _, _) => Ok(Value::Bool(l != r)),
        (Add, Value::String(a), Value::String(b)) => Ok(Value::String(format!("{a}{b}"))),
        (_, Value::Number(a), Value::Number(b)) => {
            let (a, b) = (*a, *b);
            Ok(match op {
                Lt => Value::Bool(a < b),
                Le => Value::Bool(a <= b),
                Gt => Value::Bool(a > b),
                Ge => Value::Bool(a >= b),
                Add => Value::Number(a + b),
                Sub => Value::Number(a - b),
                Mul => Value::Number(a * b),
                Div | Rem if b == 0.0 => return Err(EvalError::DivisionByZero),
                Div => Value::Number(a / b),
                Rem => Value::Number(a % b),
                Or | And | Eq | Ne => return Err(binary_error(op, l, r)),
            })
        }
        (Lt | Le | Gt | Ge, Value::String(a), Value::String(b)) => Ok(Value::Bool(match op {
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            _ => a >= b,
        })),
        _ => Err(binary_error(op, l, r)),
    }
}

fn unary_error(op: &'static str, value: &Value) -> EvalError {
    EvalError::Types {
        op,
        left: value.type_name(),
        right: "",
    }
}

fn binary_error(op: BinOp, l: &Value, r: &Value) -> EvalError {
    EvalError::Types {
        op: op.symbol(),
        left: l.type_name(),
        right: r.type_name(),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 20] = [
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", "(", ")",
    ".", ",",
];

fn lex(text: &str) -> Result<Vec<(Token, usize)>, ExprError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // CEL line comments (upstream's README writes one above an expression).
        if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
            continue;
        }
        let start = i;
        if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            let literal = &text[start..i];
            // CEL's unsigned suffix is accepted: `1u`.
            let digits = literal.strip_suffix(['u', 'U']).unwrap_or(literal);
            let value = digits.parse::<f64>().map_err(|_| ExprError {
                message: format!("`{literal}` is not a number"),
                at: start,
            })?;
            tokens.push((Token::Number(value), start));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push((Token::Ident(text[start..i].to_string()), start));
        } else if c == b'\'' || c == b'"' {
            i += 1;
            let mut value = String::new();
            loop {
                let Some(ch) = text[i..].chars().next() else {
                    return Err(ExprError {
                        message: "unterminated string".into(),
                        at: start,
                    });
                };
                i += ch.len_utf8();
                if ch as u32 == u32::from(c) {
                    break;
                }
                if ch == '\\' {
                    let Some(escaped) = text[i..].chars().next() else {
                        continue;
                    };
                    i += escaped.len_utf8();
                    value.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                } else {
                    value.push(ch);
                }
            }
            tokens.push((Token::Str(value), start));
        } else if let Some(p) = PUNCTS.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            tokens.push((Token::Punct(p), start));
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(ExprError {
                message: format!("unexpected `{ch}`"),
                at: start,
            });
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    depth: usize,
    operators: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<(&Token, usize)> {
        self.tokens.get(self.pos).map(|(t, at)| (t, *at))
    }

    fn at(&self) -> usize {
        self.peek().map_or(self.end, |(_, at)| at)
    }

    fn eat(&mut self, punct: &str) -> bool {
        if matches!(self.peek(), Some((Token::Punct(p), _)) if *p == punct) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punct: &str) -> Result<(), ExprError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{punct}`")))
        }
    }

    fn error(&self, message: String) -> ExprError {
        ExprError {
            message,
            at: self.at(),
        }
    }

    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(())
    }

    fn conditional(&mut self) -> Result<Node, ExprError> {
        self.enter()?;
        let cond = self.binary(0)?;
        let node = if self.eat("?") {
            let then = self.conditional()?;
            self.expect(":")?;
            let otherwise = self.conditional()?;
            Node::Cond(Box::new(cond), Box::new(then), Box::new(otherwise))
        } else {
            cond
        };
        self.depth -= 1;
        Ok(node)
    }

    /// Binary operators by precedence level: `||`, `&&`, comparisons, additive,
    /// multiplicative; all left-associative.
    fn binary(&mut self, level: usize) -> Result<Node, ExprError> {
        const LEVELS: [&[(&str, BinOp)]; 5] = [
            &[("||", BinOp::Or)],
            &[("&&", BinOp::And)],
            &[
                ("==", BinOp::Eq),
                ("!=", BinOp::Ne),
                ("<=", BinOp::Le),
                (">=", BinOp::Ge),
                ("<", BinOp::Lt),
                (">", BinOp::Gt),
            ],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        'outer: loop {
            for (symbol, op) in *ops {
                if self.eat(symbol) {
                    self.operators += 1;
                    if self.operators > MAX_OPERATORS {
                        return Err(self.error(format!("more than {MAX_OPERATORS} operators")));
                    }
                    let right = self.binary(level + 1)?;
                    left = Node::Binary(*op, Box::new(left), Box::new(right));
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        if self.eat("!") {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Not(Box::new(inner)));
        }
        if self.eat("-") {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Neg(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Node, ExprError> {
        let at = self.at();
        let Some((token, _)) = self.peek() else {
            return Err(self.error("the expression ends too early".into()));
        };
        let token = token.clone();
        self.pos += 1;
        match token {
            Token::Number(n) => Ok(Node::Literal(Value::Number(n))),
            Token::Str(s) => Ok(Node::Literal(Value::String(s))),
            Token::Punct("(") => {
                let inner = self.conditional()?;
                self.expect(")")?;
                Ok(inner)
            }
            Token::Punct(p) => Err(ExprError {
                message: format!("unexpected `{p}`"),
                at,
            }),
            Token::Ident(name) => match name.as_str() {
                "true" => Ok(Node::Literal(Value::Bool(true))),
                "false" => Ok(Node::Literal(Value::Bool(false))),
                "null" => Ok(Node::Literal(Value::Null)),
                "has" if self.eat("(") => {
                    let path = self.path(at)?;
                    if path.is_empty() {
                        return Err(ExprError {
                            message: "has() takes a field selection, as has(usage.prompt_tokens)"
                                .into(),
                            at,
                        });
                    }
                    self.expect(")")?;
                    Ok(Node::Has(path))
                }
                VARIABLE => {
                    self.pos -= 1;
                    Ok(Node::Path(self.path(at)?))
                }
                other if self.eat("(") => Err(ExprError {
                    message: format!("function `{other}` is not supported"),
                    at,
                }),
                other => Err(ExprError {
                    message: format!(
                        "undeclared reference `{other}` (the only variable is `usage`)"
                    ),
                    at,
                }),
            },
        }
    }

    /// `usage` then `.FIELD`s: the field names.
    fn path(&mut self, at: usize) -> Result<Vec<String>, ExprError> {
        match self.peek() {
            Some((Token::Ident(name), _)) if name == VARIABLE => self.pos += 1,
            _ => {
                return Err(ExprError {
                    message: "expected `usage`".into(),
                    at,
                });
            }
        }
        let mut path = Vec::new();
        while self.eat(".") {
            match self.peek() {
                Some((Token::Ident(name), _)) => {
                    path.push(name.clone());
                    self.pos += 1;
                }
                _ => return Err(self.error("expected a field name after `.`".into())),
            }
            if path.len() > MAX_DEPTH {
                return Err(self.error("the field path is too long".into()));
            }
        }
        if self.eat("(") {
            return Err(self.error("methods and indexing are not supported".into()));
        }
        Ok(path)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn usage(prompt: f64, completion: f64) -> Value {
        Value::object([
            ("prompt_tokens", Value::Number(prompt)),
            ("completion_tokens", Value::Number(completion)),
            ("total_tokens", Value::Number(prompt + completion)),
        ])
    }

    fn eval_text(text: &str, usage: &Value) -> Result<Value, EvalError> {
        Expr::parse(text).unwrap().eval(usage)
    }

    /// Upstream's README and test expressions.
    #[test]
    fn upstreams_examples_evaluate() {
        let u = usage(7.0, 3.0);
        let n = |v: f64| Ok(Value::Number(v));
        assert_eq!(
            eval_text("usage.prompt_tokens + usage.completion_tokens", &u),
            n(10.0)
        );
        assert_eq!(eval_text("usage.prompt_tokens\n", &u), n(7.0));
        assert_eq!(
            eval_text(
                "(has(usage.prompt_tokens) ? usage.prompt_tokens : 0) + (has(usage.completion_tokens) ? usage.completion_tokens : 0)",
                &u
            ),
            n(10.0)
        );
        assert_eq!(
            eval_text(
                "has(usage.prompt_tokens) && has(usage.completion_tokens)",
                &u
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            eval_text("usage.completion_tokens > 0", &usage(1.0, 0.0)),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            eval_text("'not a number'", &u),
            Ok(Value::String("not a number".into()))
        );
        assert_eq!(
            eval_text("usage.non_existent_field", &u),
            Err(EvalError::NoSuchField("non_existent_field".into()))
        );
        assert_eq!(
            eval_text("// condition\nhas(usage.completion_tokens)", &u),
            Ok(Value::Bool(true))
        );
    }

    #[test]
    fn upstreams_syntax_errors_are_refused() {
        for bad in [
            "usage.prompt_tokens + -",
            "usage.prompt_tokens > ",
            "",
            "usage.",
            "(1",
            "1 1",
        ] {
            let err = Expr::parse(bad).unwrap_err();
            assert!(err.to_string().contains("supported:"), "{bad}: {err}");
        }
    }

    #[test]
    fn outside_the_subset_is_refused_naming_it() {
        for (bad, says) in [
            ("size(usage)", "function `size`"),
            ("request.model", "undeclared reference `request`"),
            ("usage.x.exists(y, y > 1)", "methods"),
            ("usage['x']", "unexpected `[`"),
            ("has(1)", "expected `usage`"),
            ("has(usage)", "field selection"),
        ] {
            let err = Expr::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn precedence_and_types() {
        let u = usage(2.0, 3.0);
        assert_eq!(eval_text("1 + 2 * 3 - 4 / 2", &u), Ok(Value::Number(5.0)));
        assert_eq!(
            eval_text("-usage.prompt_tokens + 10 % 4", &u),
            Ok(Value::Number(0.0))
        );
        assert_eq!(
            eval_text("!(1 < 2) || 2 >= 2 && true", &u),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            eval_text("false && usage.missing", &u),
            Ok(Value::Bool(false))
        );
        assert_eq!(eval_text("1 / 0", &u), Err(EvalError::DivisionByZero));
        assert!(matches!(
            eval_text("true + 1", &u),
            Err(EvalError::Types { .. })
        ));
        assert!(matches!(
            eval_text("1 ? 2 : 3", &u),
            Err(EvalError::Types { .. })
        ));
        assert_eq!(eval_text("has(usage.a.b)", &u), Ok(Value::Bool(false)));
    }

    #[test]
    fn nesting_and_length_are_bounded() {
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(
            Expr::parse(&deep)
                .unwrap_err()
                .to_string()
                .contains("nests deeper")
        );
        let negs = format!("{}1", "-".repeat(100));
        assert!(Expr::parse(&negs).is_err());
        let long = "1+".repeat(3000) + "1";
        assert!(
            Expr::parse(&long)
                .unwrap_err()
                .to_string()
                .contains("bytes")
        );
        let flat = "1+".repeat(MAX_OPERATORS) + "1";
        assert_eq!(
            Expr::parse(&flat).unwrap().eval(&Value::Null),
            Ok(Value::Number(MAX_OPERATORS as f64 + 1.0))
        );
        let over = "1+".repeat(MAX_OPERATORS + 1) + "1";
        assert!(
            Expr::parse(&over)
                .unwrap_err()
                .to_string()
                .contains("operators")
        );
    }
}
