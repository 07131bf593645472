"""Typed stubs of harmony_ldp (the public API; docstrings in the implementation)."""

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

try:
    from pandas import DataFrame as _DataFrame
except ImportError:  # pandas is optional
    _DataFrame = Any  # type: ignore[misc,assignment]

__version__: str

FREQUENCY_NAMES: Tuple[str, ...]
NUMERIC_NAMES: Tuple[str, ...]
STRATEGY_NAMES: Tuple[str, ...]

#: A DataFrame (pandas installed and as_frame not False) or a dict of numpy arrays.
EstimateTable = Union[_DataFrame, Dict[str, npt.NDArray[np.float64]]]
#: A pandas DataFrame or a mapping of column name -> 1-D array-like.
Frame = Union[_DataFrame, Mapping[str, Any]]

class HarmonyError(ValueError):
    field: str
    value: str
    expected: str
    def __init__(self, message: str, field: str = ..., value: str = ..., expected: str = ...) -> None: ...

class FrequencyOracle:
    def __init__(self, name: str, epsilon: float, d: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def d(self) -> int: ...
    @property
    def layout(self) -> str: ...
    @property
    def report_dtype(self) -> np.dtype[Any]: ...
    @property
    def report_columns(self) -> int: ...
    @property
    def details(self) -> Dict[str, float]: ...
    def randomize(self, values: npt.ArrayLike, seed: Optional[int] = None) -> npt.NDArray[np.unsignedinteger[Any]]: ...
    def estimate(self, reports: npt.ArrayLike, *, as_frame: Optional[bool] = None) -> EstimateTable: ...
    def variance(self, frequencies: npt.ArrayLike, n: float = 1) -> npt.NDArray[np.float64]: ...
    def worst_case_variance(self) -> float: ...

class NumericMechanism:
    def __init__(self, name: str, epsilon: float, low: float = -1.0, high: float = 1.0) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    def randomize(self, values: npt.ArrayLike, seed: Optional[int] = None) -> npt.NDArray[np.float64]: ...
    def estimate(self, reports: npt.ArrayLike, *, as_frame: Optional[bool] = None) -> EstimateTable: ...
    def variance(self, values: npt.ArrayLike) -> npt.NDArray[np.float64]: ...
    def worst_case_variance(self) -> float: ...
    def variance_coefficients(self) -> Tuple[float, float]: ...

def unpack_bits(reports: npt.ArrayLike, d: int) -> npt.NDArray[np.bool_]: ...

class Schema:
    def __init__(self, spec: Mapping[str, Any]) -> None: ...
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Schema: ...
    @classmethod
    def from_toml(cls, path: Union[str, os.PathLike[str]]) -> Schema: ...
    @classmethod
    def infer(cls, frame: Frame, max_categories: int = 100, skip: Sequence[str] = ()) -> Schema: ...
    @property
    def attributes(self) -> List[Dict[str, Any]]: ...
    @property
    def names(self) -> List[str]: ...
    @property
    def epsilon(self) -> Optional[List[float]]: ...
    @property
    def strategies(self) -> Optional[List[str]]: ...
    @property
    def invalid(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_toml(self) -> str: ...
    def encode(self, frame: Frame) -> Tuple[List[npt.NDArray[Any]], Dict[str, int]]: ...

def simulate(
    frame: Union[Frame, Mapping[str, Any]],
    schema: Optional[Union[Schema, Mapping[str, Any], str, os.PathLike[str], Frame]] = None,
    *,
    epsilon: Optional[Union[float, Sequence[float]]] = None,
    strategy: Optional[Union[str, Sequence[str]]] = None,
    numeric_mechanism: Optional[str] = None,
    categorical_mechanism: Optional[str] = None,
    k: Union[str, int] = "optimal",
    runs: int = 1,
    seed: int = 1,
    as_frame: Optional[bool] = None,
) -> Union[_DataFrame, Dict[str, Any], Estimates]: ...

class Estimates:
    document: Dict[str, Any]
    def __init__(self, document: Mapping[str, Any], as_frame: Optional[bool] = None) -> None: ...
    @property
    def task(self) -> str: ...
    @property
    def reports(self) -> int: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def note(self) -> Optional[str]: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def names(self) -> List[str]: ...
    def table(self, name: str) -> Union[_DataFrame, Dict[str, Any]]: ...
    def __getitem__(self, name: str) -> Union[_DataFrame, Dict[str, Any]]: ...

def simulate_task(
    spec: Mapping[str, Any],
    frame: Union[Frame, Sequence[Union[str, Sequence[str]]]],
    seed: int = 1,
    *,
    query: Optional[Mapping[str, Any]] = None,
    as_frame: Optional[bool] = None,
) -> Estimates: ...

class Model:
    config: Dict[str, Any]
    estimates: Estimates
    features: List[str]
    coef_: npt.NDArray[np.float64]
    def __init__(self, config: Mapping[str, Any], document: Mapping[str, Any]) -> None: ...
    def decision_function(self, frame: Frame) -> npt.NDArray[np.float64]: ...
    def predict(self, frame: Frame) -> npt.NDArray[Any]: ...
    def score(self, frame: Frame) -> float: ...

def train(
    frame: Frame,
    target: str,
    model: str = "logistic",
    epsilon: float = 1.0,
    *,
    schema: Optional[Union[Schema, Mapping[str, Any], Sequence[Mapping[str, Any]]]] = None,
    batch_size: Optional[int] = None,
    rounds: Optional[int] = None,
    mechanism: Optional[str] = None,
    schedule: Optional[str] = None,
    positive: Optional[str] = None,
    threshold: Optional[float] = None,
    learning_rate: Optional[float] = None,
    lam: Optional[float] = None,
    seed: int = 1,
) -> Model: ...

def plan(
    schema: Schema,
    *,
    users: Optional[int] = None,
    epsilon: Union[float, Sequence[float], None] = None,
    target_error: Optional[float] = None,
    categorical_mechanism: Optional[str] = None,
    as_frame: Optional[bool] = None,
) -> Union[_DataFrame, Dict[str, List[Any]]]: ...

class Device:
    url: str
    policy: Dict[str, Any]
    invalid: str
    store: Optional[str]
    batch: int
    timeout: float
    attempts: int
    def __init__(
        self,
        url: str,
        *,
        max_epsilon: float = 10.0,
        tasks: Optional[Sequence[str]] = None,
        mechanisms: Optional[Sequence[str]] = None,
        approximate: bool = False,
        max_delta: Optional[float] = None,
        budget: Optional[Union[str, Mapping[str, float]]] = None,
        max_item_id: Optional[int] = None,
        store: Optional[Union[str, "os.PathLike[str]"]] = None,
        invalid: str = "error",
        batch: int = 1000,
        timeout: float = 60.0,
        attempts: int = 5,
    ) -> None: ...
    def config(self, collection: str) -> Dict[str, Any]: ...
    def submit(
        self,
        collection: str,
        frame: Union[Frame, Sequence[Union[str, Sequence[str]]]],
        *,
        invalid: Optional[str] = None,
    ) -> Dict[str, int]: ...
    def report(self, collection: str, record: Mapping[str, Any], *, series: Optional[str] = None) -> Dict[str, int]: ...
    def spends(self) -> List[Dict[str, Any]]: ...

class Analyst:
    url: str
    timeout: float
    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None: ...
    def create(
        self, spec: Mapping[str, Any], *, name: Optional[str] = None, description: Optional[str] = None
    ) -> Tuple[str, Dict[str, Any]]: ...
    def collections(self) -> List[Dict[str, Any]]: ...
    def config(self, collection: str) -> Dict[str, Any]: ...
    def estimates(
        self,
        collection: str,
        *,
        ranges: Optional[Sequence[Sequence[float]]] = None,
        quantiles: Optional[Sequence[float]] = None,
        from_: Optional[str] = None,
        to: Optional[str] = None,
        as_frame: Optional[bool] = None,
        rects: Optional[Sequence[Sequence[float]]] = None,
    ) -> Estimates: ...
    def series(
        self,
        collection: str,
        period: str = "day",
        *,
        from_: Optional[str] = None,
        to: Optional[str] = None,
        ranges: Optional[Sequence[Sequence[float]]] = None,
        quantiles: Optional[Sequence[float]] = None,
        as_frame: Optional[bool] = None,
    ) -> Any: ...
    def compare(
        self,
        collection: str,
        a: Tuple[Optional[str], Optional[str]],
        b: Tuple[Optional[str], Optional[str]],
        *,
        as_frame: Optional[bool] = None,
    ) -> Any: ...

def read_spec(path: Union[str, "os.PathLike[str]"]) -> str: ...
def device_reports(config: Mapping[str, Any], frame: Any, max_epsilon: float = 10.0) -> List[Tuple[str, bytes]]: ...
def resolve_config(request: Mapping[str, Any], collection: str = "local") -> Dict[str, Any]: ...

class Aggregator:
    def __init__(self, spec: Union[str, Mapping[str, Any]]) -> None: ...
    def add_arrow(self, column: Any) -> int: ...
    def add(self, reports: Iterable[bytes]) -> int: ...
    def save(self) -> bytes: ...
    def merge(self, state: bytes) -> None: ...
    @property
    def count(self) -> int: ...
    def estimate(self, query: Optional[str] = None) -> Dict[str, Any]: ...
