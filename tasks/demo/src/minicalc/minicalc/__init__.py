"""minicalc: a safe arithmetic expression calculator."""

from minicalc.errors import CalcError, CalcSyntaxError, EvalError, UndefinedNameError
from minicalc.evaluator import CONSTANTS, FUNCTIONS, Evaluator
from minicalc.formatting import format_number
from minicalc.parser import parse
from minicalc.session import Session, evaluate
from minicalc.tokens import Token, TokenKind, tokenize

__version__ = "1.2.0"

__all__ = [
    "CONSTANTS",
    "FUNCTIONS",
    "CalcError",
    "CalcSyntaxError",
    "EvalError",
    "Evaluator",
    "Session",
    "Token",
    "TokenKind",
    "UndefinedNameError",
    "evaluate",
    "format_number",
    "parse",
    "tokenize",
]
