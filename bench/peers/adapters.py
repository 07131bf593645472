"""One adapter per (library, mechanism) around each peer's *public* API, plus `numpy_ref`.

Frequency adapters expose
    client(values) -> reports         values: a list of ints (per-user libraries) or an int64
                                      array (numpy_ref; `wants_list = False`)
    server(reports, n) -> estimates   ingest every report and estimate all d frequencies
    reset()                           forget the server state (called before every timed server run)
Numeric adapters expose client(values) only (a list of floats, or a float64 array).

Libraries: pure_ldp | multi_freq_ldpy | ldp_toolbox | opendp | numpy_ref.
numpy_ref is a vectorised NumPy implementation written for this benchmark, NOT a peer library:
it shows how fast Python goes when it does not call a library once per user, so Harmony is also
compared with "Python done right". GRR, OUE, OLH, Duchi, PM and Laplace come from the project's
peer harness; HR (Hadamard Response) and HM (Hybrid Mechanism) were written here.
"""
import math
import warnings

import numpy as np

warnings.filterwarnings("ignore")


def ident(x):
    """Index mapper: values are already 0..d-1 (pure-ldp's default maps x -> x-1)."""
    return x


class Adapter:
    lib = "?"
    mech = "?"
    kind = "frequency"  # or "numeric"
    wants_list = True  # client() takes a python list (converted outside the timed region)
    has_server = False
    notes = ""

    def __init__(self, d, eps):
        self.d = d
        self.eps = eps

    def client(self, values):
        raise NotImplementedError

    def server(self, reports, n):
        raise NotImplementedError

    def reset(self):
        pass


# =============================================================================
# pure-ldp 1.2.0 (Maddock): per-user Client/Server classes, incremental server
# =============================================================================
class PureBase(Adapter):
    lib = "pure_ldp"
    has_server = True
    CHUNK = 10_000

    def client(self, values):
        priv = self.c.privatise
        return [priv(v) for v in values]

    def reset(self):
        self.s.reset()

    def server(self, reports, n):
        for s in range(0, n, self.CHUNK):
            self.s.aggregate_all(reports[s:s + self.CHUNK])
        return np.asarray(self.s.estimate_all(range(self.d), suppress_warnings=True), dtype=float) / n


class PureGRR(PureBase):
    mech = "GRR"
    notes = "DEClient (direct encoding)"
    has_server = False

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from pure_ldp.frequency_oracles.direct_encoding import DEClient
        self.c = DEClient(eps, d, index_mapper=ident)


class PureOUE(PureBase):
    mech = "OUE"
    notes = "UEClient/UEServer(use_oue=True)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
        self.c = UEClient(eps, d, use_oue=True, index_mapper=ident)
        self.s = UEServer(eps, d, use_oue=True, index_mapper=ident)


class PureOLH(PureBase):
    mech = "OLH"
    notes = "LHClient/LHServer(use_olh=True); server loops over d per report"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
        self.c = LHClient(eps, d, use_olh=True, index_mapper=ident)
        self.s = LHServer(eps, d, use_olh=True, index_mapper=ident)


class PureHR(PureBase):
    mech = "HR"
    notes = "HadamardResponse (eps<=1: high-privacy one-block variant; eps>1: blocked variant)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from pure_ldp.frequency_oracles.hadamard_response import (HadamardResponseClient,
                                                                  HadamardResponseServer)
        self.s = HadamardResponseServer(eps, d, index_mapper=ident)
        self.c = HadamardResponseClient(eps, d, self.s.get_hash_funcs(), index_mapper=ident)


# =============================================================================
# multi-freq-ldpy 0.2.5 (Arcolezi): functions, numba-jitted GRR/UE clients
# =============================================================================
class MFBase(Adapter):
    lib = "multi_freq_ldpy"
    notes = "clip + renormalise in the aggregator"


class MFGRR(MFBase):
    mech = "GRR"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
        self.cf = GRR_Client

    def client(self, values):
        cf, d, eps = self.cf, self.d, self.eps
        return [cf(v, d, eps) for v in values]


class MFOUE(MFBase):
    mech = "OUE"
    has_server = True
    notes = "UE_Client (numba, float64 vector per user) / UE_Aggregator_MI"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client
        self.cf, self.af = UE_Client, UE_Aggregator_MI

    def client(self, values):
        cf, d, eps = self.cf, self.d, self.eps
        return [cf(v, d, eps, True) for v in values]

    def server(self, reports, n):
        return self.af(reports, self.eps, True)


class MFOLH(MFBase):
    mech = "OLH"
    has_server = True
    notes = "LH_Client / LH_Aggregator_MI (python loop over d per report)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
        self.cf, self.af = LH_Client, LH_Aggregator_MI

    def client(self, values):
        cf, d, eps = self.cf, self.d, self.eps
        return [cf(v, d, eps, True) for v in values]

    def server(self, reports, n):
        return self.af(reports, self.d, self.eps, True)


# =============================================================================
# ldp-toolbox 0.1.3: classes with obfuscate()/estimate()
# =============================================================================
class TBBase(Adapter):
    lib = "ldp_toolbox"

    def client(self, values):
        ob = self.m.obfuscate
        return [ob(v) for v in values]

    def server(self, reports, n):
        return self.m.estimate(reports)


class TBGRR(TBBase):
    mech = "GRR"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from ldp_toolbox.protocols.frequency.grr import GeneralizedRandomizedResponse
        self.m = GeneralizedRandomizedResponse(d, eps)


class TBOUE(TBBase):
    mech = "OUE"
    has_server = True
    notes = "UnaryEncoding(optimal=True) (numba obfuscate, float64 vector per user)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from ldp_toolbox.protocols.frequency.ue import UnaryEncoding
        self.m = UnaryEncoding(d, eps, optimal=True)


class TBOLH(TBBase):
    mech = "OLH"
    has_server = True
    notes = "LocalHashing(optimal=True): estimate() = one joblib task per report (LOKY_MAX_CPU_COUNT=1)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        from ldp_toolbox.protocols.frequency.lh import LocalHashing
        self.m = LocalHashing(d, eps, optimal=True)


# =============================================================================
# OpenDP 0.16.0: Rust core through ctypes; generic RR and Laplace primitives
# =============================================================================
def _opendp():
    import opendp.prelude as dp
    dp.enable_features("contrib")
    return dp


class ODGRR(Adapter):
    lib, mech = "opendp", "GRR"
    notes = "make_randomized_response over the category list, one call per user"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        dp = _opendp()
        e = math.exp(eps)
        self.m = dp.m.make_randomized_response(list(range(d)), e / (e + d - 1))
        assert abs(self.m.map(1) - eps) < 1e-6, self.m.map(1)

    def client(self, values):
        m = self.m
        return [m(v) for v in values]


class ODLaplace(Adapter):
    lib, mech, kind = "opendp", "Laplace", "numeric"
    notes = "make_laplace(atom_domain[-1,1], scale 2/eps), one call per user"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        dp = _opendp()
        self.m = dp.m.make_laplace(dp.atom_domain(bounds=(-1.0, 1.0), nan=False), dp.absolute_distance(T=float),
                                   scale=2.0 / eps)
        assert abs(self.m.map(2.0) - eps) < 1e-9

    def client(self, values):
        m = self.m
        return [m(v) for v in values]


class ODLaplaceVec(Adapter):
    lib, mech, kind = "opendp-vec", "Laplace", "numeric"
    notes = "make_laplace(vector_domain): one call for all users (iid noise per element = local Laplace)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        dp = _opendp()
        self.m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(bounds=(-1.0, 1.0), nan=False)),
                                   dp.l1_distance(T=float), scale=2.0 / eps)

    def client(self, values):
        return self.m(values)


# =============================================================================
# numpy_ref: vectorised reference implementations (ours, not a peer)
# =============================================================================
class NPBase(Adapter):
    lib = "numpy_ref"
    wants_list = False
    notes = "vectorised numpy"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        self.rng = np.random.default_rng(np.random.randint(0, 2 ** 31))  # seeded via seed_everything()


class NPGRR(NPBase):
    mech = "GRR"

    def client(self, values):
        v = np.asarray(values, dtype=np.int64)
        e = math.exp(self.eps)
        p = e / (e + self.d - 1)
        keep = self.rng.random(len(v)) < p
        other = self.rng.integers(0, self.d - 1, len(v))
        other += other >= v
        return np.where(keep, v, other)


class NPOUE(NPBase):
    mech = "OUE"
    has_server = True
    notes = "vectorised numpy, reports bit-packed (np.packbits)"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        self.p, self.q = 0.5, 1 / (math.exp(eps) + 1)

    def client(self, values):
        v = np.asarray(values, dtype=np.int64)
        out = []
        ch = max(1, (1 << 24) // self.d)
        for s in range(0, len(v), ch):
            vv = v[s:s + ch]
            bits = self.rng.random((len(vv), self.d), dtype=np.float32) < self.q
            bits[np.arange(len(vv)), vv] = self.rng.random(len(vv)) < self.p
            out.append(np.packbits(bits, axis=1))
        return out

    def server(self, reports, n):
        c = np.zeros(self.d)
        for blk in reports:
            c += np.unpackbits(blk, axis=1, count=self.d).sum(0)
        return (c / n - self.q) / (self.p - self.q)


class NPOLH(NPBase):
    mech = "OLH"
    has_server = True
    notes = "vectorised numpy, hash ((a*x+b) mod 2^31-1) mod g; server O(n*d) vectorised"
    P = (1 << 31) - 1

    def __init__(self, d, eps):
        super().__init__(d, eps)
        self.g = int(round(math.exp(eps))) + 1

    def client(self, values):
        v = np.asarray(values, dtype=np.int64)
        n = len(v)
        a = self.rng.integers(1, self.P, n, dtype=np.int64)
        b = self.rng.integers(0, self.P, n, dtype=np.int64)
        h = ((a * v + b) % self.P) % self.g
        e = math.exp(self.eps)
        keep = self.rng.random(n) < e / (e + self.g - 1)
        other = self.rng.integers(0, self.g - 1, n)
        other += other >= h
        return (a, b, np.where(keep, h, other))

    def server(self, reports, n):
        a, b, y = reports
        xs = np.arange(self.d, dtype=np.int64)
        c = np.zeros(self.d)
        ch = max(1, (1 << 22) // self.d)
        for s in range(0, len(y), ch):
            hh = ((a[s:s + ch, None] * xs[None, :] + b[s:s + ch, None]) % self.P) % self.g
            c += (hh == y[s:s + ch, None]).sum(0)
        e = math.exp(self.eps)
        p, q = e / (e + self.g - 1), 1.0 / self.g
        return (c / n - q) / (p - q)


def fwht(a: np.ndarray) -> np.ndarray:
    """Unnormalised Walsh-Hadamard transform along the last axis (natural Sylvester order,
    H[i, j] = (-1)^popcount(i & j)); the length must be a power of two. O(m log m)."""
    a = np.array(a, dtype=np.float64)
    lead, m = a.shape[:-1], a.shape[-1]
    h = 1
    while h < m:
        a = a.reshape(*lead, m // (2 * h), 2, h)
        x, y = a[..., 0, :], a[..., 1, :]
        a = np.stack([x + y, x - y], axis=-2).reshape(*lead, m)
        h *= 2
    return a


class NPHR(NPBase):
    """Hadamard Response (Acharya-Sun-Zhang), general block form (docs/MECHANISMS.md A6); one block
    (the high-privacy form) when e^eps < 2. Server: histogram + one FWHT per block,
    O(n + K log b)."""
    mech = "HR"
    has_server = True
    notes = "vectorised numpy (written for this benchmark): histogram + FWHT per block"

    def __init__(self, d, eps):
        super().__init__(d, eps)
        e = math.exp(eps)
        self.e = e
        self.B = 1 if e < 2 else 2 ** int(math.floor(math.log2(min(e, 2 * d))))
        self.b = 2 ** int(math.ceil(math.log2(d / self.B + 1)))
        self.K = self.B * self.b
        self.D = 2 * self.B - 1 + e
        x = np.arange(d, dtype=np.int64)
        self.blk, self.row = x // (self.b - 1), x % (self.b - 1) + 1

    def client(self, values):
        v = np.asarray(values, dtype=np.int64)
        n = len(v)
        b = self.b
        blk, row = v // (b - 1), v % (b - 1) + 1
        # uniform on C_x = {y in block : H_b[row, y] = +1}: a uniform y, and if it falls outside
        # C_x flip the lowest set bit of row in it (a bijection between the two halves)
        yp = self.rng.integers(0, b, n)
        odd = np.bitwise_count(row & yp) & 1
        yp ^= np.where(odd == 1, row & -row, 0)
        in_c = blk * b + yp
        unif = self.rng.integers(0, self.K, n)
        return np.where(self.rng.random(n) < 2 * self.B / self.D, unif, in_c)

    def server(self, reports, n):
        f = np.bincount(reports, minlength=self.K).astype(np.float64) / n
        ft = fwht(f.reshape(self.B, self.b))
        return self.D * ft[self.blk, self.row] / (self.e - 1)


class NPNumeric(NPBase):
    kind = "numeric"


class NPLaplace(NPNumeric):
    mech = "Laplace"

    def client(self, x):
        return x + self.rng.laplace(0.0, 2.0 / self.eps, len(x))


class NPDuchi(NPNumeric):
    mech = "Duchi"

    def client(self, x):
        e = math.exp(self.eps)
        c = (e + 1) / (e - 1)
        p = (e - 1) / (2 * e + 2) * x + 0.5
        return np.where(self.rng.random(len(x)) < p, c, -c)


def _pm(rng, x, eps):
    """Piecewise Mechanism (Wang et al. ICDE'19), vectorised."""
    n = len(x)
    a = math.exp(eps / 2)
    C = (a + 1) / (a - 1)
    lo = (C + 1) / 2 * x - (C - 1) / 2
    hi = lo + C - 1
    inside = rng.random(n) < a / (a + 1)
    u = rng.random(n)
    y_in = lo + u * (hi - lo)
    w = u * (C + 1)  # outside: uniform on [-C, l) U (r, C], total length C + 1
    left_len = lo + C
    y_out = np.where(w < left_len, -C + w, hi + (w - left_len))
    return np.where(inside, y_in, y_out)


def _duchi(rng, x, eps):
    e = math.exp(eps)
    c = (e + 1) / (e - 1)
    return np.where(rng.random(len(x)) < (e - 1) / (2 * e + 2) * x + 0.5, c, -c)


class NPPM(NPNumeric):
    mech = "PM"

    def client(self, x):
        return _pm(self.rng, x, self.eps)


EPSILON_STAR = 0.6093515  # HM uses Duchi only below this (docs/MECHANISMS.md B4)


class NPHM(NPNumeric):
    """Hybrid Mechanism: PM with probability alpha = 1 - e^(-eps/2) (eps > eps*), else Duchi;
    each branch evaluated only on its own users (written for this benchmark)."""
    mech = "HM"

    def client(self, x):
        alpha = 1 - math.exp(-self.eps / 2) if self.eps > EPSILON_STAR else 0.0
        use_pm = self.rng.random(len(x)) < alpha
        out = np.empty_like(x)
        out[use_pm] = _pm(self.rng, x[use_pm], self.eps)
        out[~use_pm] = _duchi(self.rng, x[~use_pm], self.eps)
        return out


REGISTRY = {
    ("pure_ldp", "GRR"): PureGRR,
    ("pure_ldp", "OUE"): PureOUE,
    ("pure_ldp", "OLH"): PureOLH,
    ("pure_ldp", "HR"): PureHR,
    ("multi_freq_ldpy", "GRR"): MFGRR,
    ("multi_freq_ldpy", "OUE"): MFOUE,
    ("multi_freq_ldpy", "OLH"): MFOLH,
    ("ldp_toolbox", "GRR"): TBGRR,
    ("ldp_toolbox", "OUE"): TBOUE,
    ("ldp_toolbox", "OLH"): TBOLH,
    ("opendp", "GRR"): ODGRR,
    ("opendp", "Laplace"): ODLaplace,
    ("opendp-vec", "Laplace"): ODLaplaceVec,
    ("numpy_ref", "GRR"): NPGRR,
    ("numpy_ref", "OUE"): NPOUE,
    ("numpy_ref", "OLH"): NPOLH,
    ("numpy_ref", "HR"): NPHR,
    ("numpy_ref", "Laplace"): NPLaplace,
    ("numpy_ref", "Duchi"): NPDuchi,
    ("numpy_ref", "PM"): NPPM,
    ("numpy_ref", "HM"): NPHM,
}
