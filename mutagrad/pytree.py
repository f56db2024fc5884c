"""Flatten and rebuild nested containers of arrays (pytrees).

Containers: tuple, list, dict, namedtuple, dataclass instances and objects
registered with :func:`register_pytree`. ``None`` is an empty container (no
leaf), as in JAX. Everything else is a leaf.
"""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["tree_flatten", "tree_flatten_like", "tree_unflatten", "tree_map", "tree_leaves", "register_pytree"]

_REGISTRY: dict[type, tuple] = {}


def register_pytree(cls, flatten, unflatten):
    """Register ``cls``: ``flatten(obj) -> (children, aux)``, ``unflatten(aux, children) -> obj``."""
    _REGISTRY[cls] = (flatten, unflatten)


def _register_dicts():
    """OrderedDict and defaultdict: dicts whose type (and default factory) the rebuilt one keeps, as JAX's."""
    import collections

    register_pytree(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                    lambda keys, children: collections.OrderedDict(zip(keys, children)))
    register_pytree(collections.defaultdict, lambda d: (list(d.values()), (d.default_factory, list(d.keys()))),
                    lambda aux, children: collections.defaultdict(aux[0], zip(aux[1], children)))


_register_dicts()


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class _Node:
    __slots__ = ("kind", "aux", "children")

    def __init__(self, kind, aux, children):
        self.kind = kind
        self.aux = aux
        self.children = children

    def __repr__(self):
        return f"_Node({self.kind}, {self.children})"


_LEAF = None


_PLAIN_LEAVES = frozenset((np.ndarray, float, int, complex, np.float64, bool, type(None), str))


_NONE = type(None)


def _flatten(x, leaves):
    t = type(x)
    if x is None:  # an empty subtree, as in JAX: no leaf, rebuilt as None
        return _Node(_NONE, None, [])
    if t in _PLAIN_LEAVES:  # the common leaves, before the container checks
        leaves.append(x)
        return _LEAF
    if t is tuple or t is list:
        return _Node(t, None, [_flatten(c, leaves) for c in x])
    if t is dict:
        keys = list(x.keys())
        return _Node(dict, keys, [_flatten(x[k], leaves) for k in keys])
    if t in _REGISTRY:
        children, aux = _REGISTRY[t][0](x)
        return _Node(("reg", t), aux, [_flatten(c, leaves) for c in children])
    if _is_namedtuple(x):
        return _Node(("nt", t), None, [_flatten(c, leaves) for c in x])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [f.name for f in dataclasses.fields(x)]
        return _Node(("dc", t), (fields, x), [_flatten(getattr(x, f), leaves) for f in fields])
    leaves.append(x)
    return _LEAF


def tree_flatten(x):
    """Return ``(leaves, treedef)``."""
    leaves: list = []
    return leaves, _flatten(x, leaves)


def leaf_paths(x, path=""):
    """The paths of ``x``'s leaves, in tree_flatten's order, for messages: ``['n']``, ``[2]``, ``.w``."""
    t = type(x)
    if x is None:
        return []
    if t in _PLAIN_LEAVES:
        return [path]
    if t is tuple or t is list:
        return [p for i, c in enumerate(x) for p in leaf_paths(c, f"{path}[{i}]")]
    if t is dict:
        return [p for k in x for p in leaf_paths(x[k], f"{path}[{k!r}]")]
    if t in _REGISTRY and isinstance(x, dict):  # (OrderedDict, defaultdict: their values in key order)
        return [p for k in x for p in leaf_paths(x[k], f"{path}[{k!r}]")]
    if t in _REGISTRY:  # (its flatten function's children, by position)
        return [p for i, c in enumerate(_REGISTRY[t][0](x)[0]) for p in leaf_paths(c, f"{path}<child {i}>")]
    if _is_namedtuple(x):
        return [p for f, c in zip(x._fields, x) for p in leaf_paths(c, f"{path}.{f}")]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [p for f in dataclasses.fields(x) for p in leaf_paths(getattr(x, f.name), f"{path}.{f.name}")]
    return [path]


def _is_container(x) -> bool:
    t = type(x)
    return (t is tuple or t is list or t is dict or t in _REGISTRY or _is_namedtuple(x)
            or (dataclasses.is_dataclass(x) and not isinstance(x, type)))


def _kind_name(node) -> str:
    k = node.kind
    return k.__name__ if isinstance(k, type) else k[1].__name__


def _flatten_like(node, x, leaves, path):
    if node is _LEAF:
        if _is_container(x):
            raise ValueError(f"{path or 'it'} is a {type(x).__name__} where the structure has a single value")
        leaves.append(x)
        return
    kind = node.kind
    where = path or "it"
    if kind is _NONE:
        if x is not None:
            raise ValueError(f"{where} is a {type(x).__name__} where the structure has None")
        return
    if kind is dict:
        if type(x) is not dict:
            raise ValueError(f"{where} is a {type(x).__name__} where the structure has a dict")
        if set(x) != set(node.aux):
            missing = [k for k in node.aux if k not in x]
            extra = [k for k in x if k not in node.aux]
            raise ValueError(f"{where} has the keys {sorted(map(repr, x))} where the structure has "
                             f"{sorted(map(repr, node.aux))} (missing {missing}, unexpected {extra})")
        for k, c in zip(node.aux, node.children):  # by key, in the structure's order
            _flatten_like(c, x[k], leaves, f"{path}[{k!r}]")
        return
    if kind is tuple or kind is list or kind[0] == "nt":
        if not isinstance(x, (tuple, list)):
            raise ValueError(f"{where} is a {type(x).__name__} where the structure has a {_kind_name(node)}")
        if len(x) != len(node.children):
            raise ValueError(f"{where} has {len(x)} items where the structure has {len(node.children)}")
        for i, (c, v) in enumerate(zip(node.children, x)):
            _flatten_like(c, v, leaves, f"{path}[{i}]")
        return
    cls = kind[1]
    if type(x) is not cls:
        raise ValueError(f"{where} is a {type(x).__name__} where the structure has a {cls.__name__}")
    sub: list = []
    other = _flatten(x, sub)
    if other is _LEAF or len(other.children) != len(node.children):
        raise ValueError(f"{where} does not have the structure's fields")
    for i, (c, v) in enumerate(zip(node.children, _children_of(x, other))):
        _flatten_like(c, v, leaves, f"{path}.{i}")


def _children_of(x, node):
    tag, cls = node.kind
    if tag == "reg":
        return _REGISTRY[cls][0](x)[0]
    return [getattr(x, f) for f in node.aux[0]]


def tree_flatten_like(treedef, x, what="the value"):
    """The leaves of ``x`` in the order of ``treedef`` (dicts matched by key, not
    by position), or ValueError naming where ``x``'s structure differs."""
    leaves: list = []
    try:
        _flatten_like(treedef, x, leaves, "")
    except ValueError as e:
        raise ValueError(f"{what} does not have the structure it must match: {e}") from None
    return leaves


def _unflatten(node, it):
    if node is _LEAF:
        return next(it)
    kind = node.kind
    if kind is _NONE:
        return None
    children = [_unflatten(c, it) for c in node.children]
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return children
    if kind is dict:
        return dict(zip(node.aux, children))
    tag, cls = kind
    if tag == "nt":
        return cls(*children)
    if tag == "reg":
        return _REGISTRY[cls][1](node.aux, children)
    # dataclass: build a copy of the original with new field values
    fields, proto = node.aux
    obj = object.__new__(cls)
    if hasattr(proto, "__dict__"):
        obj.__dict__.update(proto.__dict__)
    for f, c in zip(fields, children):
        object.__setattr__(obj, f, c)
    return obj


def tree_unflatten(treedef, leaves):
    return _unflatten(treedef, iter(leaves))


def tree_leaves(x):
    return tree_flatten(x)[0]


def tree_map(fn, x, *rest):
    leaves, treedef = tree_flatten(x)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(treedef, [fn(*a) for a in zip(leaves, *others)])
