"""A griffe extension for the documentation site (mkdocs.yml loads it): it lets the API reference,
which reads the source statically, see what a few of pyggml_opt's objects are at run time.

Four patterns in the package make objects at import time that static analysis sees as plain assignments:

- ``__doc__ = nn.SequentialNetwork.__doc__`` in a class body (``models/model.py``): the class gets that
  docstring;
- ``fit = _method(fit, "example")`` in ``Model`` (``models/model.py``): a method with the function's
  signature, its first parameter named ``self``, and its docstring about "this model" with the example;
- ``ReLU = _activation("ReLU", F.relu, "doc")`` (``nn/layers/activations.py``): a ``Layer`` subclass with that
  docstring;
- ``relu = _unary("ggml_relu")`` (``nn/ops/tensor.py``): a function ``relu(a: Tensor) -> Tensor`` with the
  docstring ``_unary`` gives it.

Each rule only fills in what the code does at import time; nothing in the package depends on this file.

Docstrings are Markdown here; the few Sphinx roles in them (``:func:`name` ``) are shown as code.
"""
from __future__ import annotations

import ast
import copy
import re

import griffe

PKG = "pyggml_opt"
METHOD_FACTORY = f"{PKG}.models.model._method"
ACTIVATION_FACTORY = f"{PKG}.nn.layers.activations._activation"
UNARY_FACTORY = f"{PKG}.nn.ops.tensor._unary"
SPHINX_ROLE = re.compile(r":(?:func|meth|class|data|attr|mod|obj):`~?([^`]+)`")


def _final(collection, path: str):
    """The object at ``path`` (aliases followed), or None."""
    try:
        obj = collection[path]
        return obj.final_target if obj.is_alias else obj
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _call_to(value, factory: str) -> bool:
    return isinstance(value, griffe.ExprCall) and getattr(value.function, "canonical_path", None) == factory


def _literal(arg):
    """The Python value of a literal argument (griffe keeps it as source text), or None."""
    try:
        return ast.literal_eval(str(arg))
    except (ValueError, SyntaxError):
        return None


class PyggmlOptDocs(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.name != PKG:
            return
        self._walk(pkg, pkg.modules_collection)

    def _walk(self, obj, collection) -> None:
        for member in [obj, *obj.members.values()]:
            if not member.is_alias and member.docstring is not None:
                member.docstring.value = SPHINX_ROLE.sub(r"`\1`", member.docstring.value)
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if member.is_module or member.is_class:
                self._walk(member, collection)
            elif member.is_attribute:
                self._attribute(obj, member, collection)

    def _attribute(self, parent, attr: griffe.Attribute, collection) -> None:
        value = attr.value
        if parent.is_class and attr.name == "__doc__" and isinstance(value, griffe.ExprAttribute):
            source = _final(collection, value.canonical_path.rsplit(".", 1)[0])
            if source is not None and source.docstring is not None:
                parent.docstring = griffe.Docstring(source.docstring.value, parent=parent)
            return
        if parent.is_class and _call_to(value, METHOD_FACTORY) and len(value.arguments) == 2:
            # a name in a class body that the class does not define yet is the module's
            target = _final(collection, parent.module.resolve(str(value.arguments[0])))
            if isinstance(target, griffe.Function):
                params = [copy.copy(p) for p in target.parameters]
                if params:  # fn(model, ...) as a method: self, unannotated
                    params[0].name, params[0].annotation = "self", None
                method = griffe.Function(attr.name, lineno=attr.lineno, endlineno=attr.endlineno,
                                         parameters=griffe.Parameters(*params), returns=target.returns)
                example = _literal(value.arguments[1])
                if target.docstring is not None and isinstance(example, str):
                    doc = target.docstring.value.replace("``model``", "this model")
                    method.docstring = griffe.Docstring(f"{doc}\n\nExample::\n\n    {example}\n", parent=method)
                parent.set_member(attr.name, method)
            return
        if parent.is_module and _call_to(value, ACTIVATION_FACTORY) and len(value.arguments) == 3:
            doc = _literal(value.arguments[2])
            cls = griffe.Class(attr.name, lineno=attr.lineno, endlineno=attr.endlineno,
                               bases=[griffe.ExprName("Layer", parent=parent)])
            if isinstance(doc, str):
                cls.docstring = griffe.Docstring(doc, parent=cls)
            parent.set_member(attr.name, cls)
            return
        if parent.is_module and _call_to(value, UNARY_FACTORY) and len(value.arguments) == 1:
            c_name = _literal(value.arguments[0])
            if not isinstance(c_name, str):
                return
            tensor = griffe.ExprName("Tensor", parent=parent)
            fn = griffe.Function(attr.name, lineno=attr.lineno, endlineno=attr.endlineno,
                                 parameters=griffe.Parameters(griffe.Parameter(
                                     "a", annotation=tensor, kind=griffe.ParameterKind.positional_or_keyword)),
                                 returns=tensor)
            # the docstring _unary gives each op
            fn.docstring = griffe.Docstring(f"Element-wise {c_name[len('ggml_'):]} (``{c_name}``).", parent=fn)
            parent.set_member(attr.name, fn)
