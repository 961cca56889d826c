"""Fitting the hybrid verifier's learned decision (``factcheck fit-combiner``).

Two small calibrated models over the hybrid's named features (``pipeline.verifiers.features``):
P(attributable), fitted on the battery's ``train`` rows and on the held-out dev split of the
NLI model's own training run (nli-train-v2 sources: pairs the model never trained on), and
P(contradictory), fitted on that dev split's three-way pairs with the battery's supported
rows as further negatives. Never on a ``test`` row, never on FEVER-Symmetric or WiCE.

P(attributable) is a regularised logistic regression by default: gradient-boosted trees fit
the sets they saw as well, but on a set left out of the fit they lost to the hand cut-offs
on every battery set (they learn what tells the sets apart); a linear model over a few
features keeps to what holds across sets. Its feature family and regularisation are chosen
by ``select_linear``: leave one dataset out over the fitting rows only (never a test row).
P(contradictory) stays a tree ensemble (the rules' findings interact with the NLI model's).

Thresholds: attributable at the optimum of the mean balanced accuracy over the fitting sets
(each set counts once, whatever its size), contradictory and the edit gate at the target
precision; each chosen on out-of-fold predictions (5-fold, grouped by question or document)
so that the thresholds are not fitted to predictions on the rows that made the weights.
``leave_one_out`` refits without one set and scores that set's held-out rows, beside the
hand cut-offs on the same rows: the evidence that the combiner generalises.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from middleware.pipeline.verifiers.features import FEATURES, LEXICAL_FEATURES, NLI_FEATURES, SLOT_FEATURES
from middleware.pipeline.verifiers.features import OVERLAP_CUT
from middleware.training.claim_sets import BATTERY_SETS, Item, load_set, sample
from middleware.training.metrics import balanced_accuracy
from onnx_models.manifest import CombinerWeights, LinearModel, Tree, TreeEnsemble

if TYPE_CHECKING:
    from middleware.pipeline.verifiers import HybridVerifier

NLI_DEV_SOURCES = ("vitaminc", "docnli_mctest_fever", "factcg_cg2c")
"""nli-train-v2's sources; their share of the verifier's dev split is fitting data."""
TARGET_PRECISION = 0.9


@dataclass
class Row:
    """One claim's features, its gold label, and the hand cut-offs' label (for comparison)."""

    id: str
    dataset: str
    group: str
    split: str
    gold: str
    hand: str
    features: dict[str, float]


def nli_dev_items(nli_root: Path, model_dir: Path) -> list[Item]:
    """The nli-train-v2 pairs of the verifier's held-out dev split (premise = the evidence,
    hypothesis = the claim). The split is rebuilt from the run's ``train_meta.json`` with a
    fraction no larger than the run's (its synthetic pairs are not here, so the run's total
    is bounded from above): every pair taken is one the model never trained on."""
    from middleware.training.verifier_data import find_pair_files, read_pairs, split_dev
    from middleware.types import NLI_HEAD_LABELS

    meta = json.loads((model_dir / "train_meta.json").read_text())
    synthetic_bound = 3 * meta["data"].get("synthetic_per_label", 0)
    roots = [nli_root / "nli-train", nli_root / "nli-train-v2"]
    pairs = [p for f in find_pair_files([r for r in roots if r.is_dir()]) for p in read_pairs(f)]
    _, dev = split_dev(pairs, meta["data"]["dev_size"], meta["hyper_parameters"]["seed"], len(pairs) + synthetic_bound)
    items = []
    for pair in dev:
        if pair.source not in NLI_DEV_SOURCES:
            continue
        name = NLI_HEAD_LABELS[pair.label] if 0 <= pair.label < len(NLI_HEAD_LABELS) else "not_entailment"
        gold = {"entailment": "attributable", "contradiction": "contradictory"}.get(name, "extrapolatory")
        items.append(
            Item(
                id=f"{pair.source}-{pair.id}", dataset=pair.source, claim=pair.hypothesis, evidence=[pair.premise],
                gold=gold, split="train" if pair.source == "vitaminc" else "train-2way",
            )  # fmt: skip
        )
    return sorted(items, key=lambda i: i.id)


def battery_items(data_root: Path, per_set: int, seed: int = 13) -> list[Item]:
    """The battery's ``train`` rows (a seeded sample of ``per_set`` a set) and its ``test``
    rows as ``eval-battery`` samples them (scored in the left-out folds, never fitted)."""
    out: list[Item] = []
    for name in BATTERY_SETS:
        rows = load_set(data_root, name)
        out += sample(rows, "train", per_set or None, seed) + sample(rows, "test", 400, seed)
    return out


def _group(item: Item) -> str:
    # battery ids embed the question / document group; NLI pairs are their own group
    return item.id.rsplit("-", 1)[0] if item.dataset in BATTERY_SETS else item.id


async def collect(verifier: HybridVerifier, items: Sequence[Item], concurrency: int = 4) -> list[Row]:
    """Every item's features through the hybrid's own reading (evidence windowed as in serving)."""
    import asyncio

    from middleware.pipeline.verifiers import passages_from_texts

    semaphore = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> Row:
        async with semaphore:
            reading = await verifier.read(item.claim, passages_from_texts(item.evidence))
            hand = verifier.combine(reading.claim, reading.nli, reading.slots).label
            return Row(item.id, item.dataset, _group(item), item.split, item.gold, hand, reading.features)

    return list(await asyncio.gather(*(one(i) for i in items)))


def write_rows(rows: Iterable[Row], path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(asdict(row)) + "\n")


def read_rows(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as handle:
        return [Row(**json.loads(line)) for line in handle if line.strip()]


def feature_names(rows: Sequence[Row]) -> list[str]:
    """The fixed features, then every rule that fired on some fitting row."""
    rules = sorted({k for r in rows for k in r.features if k.startswith("rule:")})
    return list(FEATURES) + rules


def matrix(rows: Sequence[Row], names: Sequence[str]) -> np.ndarray:
    return np.asarray([[r.features.get(n, 0.0) for n in names] for r in rows], dtype=np.float64)


TREES = 100
DEPTH = 2
LEARNING_RATE = 0.05
"""Small on purpose: 100 trees of depth 2 (three questions each) fit as well out of fold as
deeper or longer ensembles on the fitting rows and keep the manifest small."""


LINEAR_FAMILIES: dict[str, tuple[str, ...]] = {
    "nli": NLI_FEATURES,
    "nli+lexical": NLI_FEATURES + LEXICAL_FEATURES,
    "nli+lexical+slots": NLI_FEATURES + LEXICAL_FEATURES + SLOT_FEATURES,
    "fixed": FEATURES,
}
"""The feature families the linear P(attributable) may read (``fixed``: every fixed feature,
lengths included; the rules' findings are left to the contradiction model)."""
STRENGTHS = (0.01, 0.03, 0.1, 0.3)
"""Inverse L2 strengths (scikit-learn's ``C``, on standardised features) tried by ``select_linear``."""


@dataclass(frozen=True)
class LinearChoice:
    """Which features the linear P(attributable) reads (a family of ``LINEAR_FAMILIES``, by
    name) and how strongly it is regularised."""

    family: str
    features: tuple[str, ...]
    strength: float


class _Linear:
    """A logistic regression on standardised columns of the full feature matrix."""

    def __init__(self, names: Sequence[str], family: Sequence[str], strength: float) -> None:
        wanted = set(family)
        self.columns = [i for i, n in enumerate(names) if n in wanted]
        self.names = [names[i] for i in self.columns]
        self.strength = strength

    def fit(self, x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> _Linear:
        from sklearn.linear_model import LogisticRegression

        cols = x[:, self.columns]
        self.mean, self.scale = cols.mean(axis=0), cols.std(axis=0)
        self.scale[self.scale == 0] = 1.0
        self.model = LogisticRegression(C=self.strength, max_iter=5000).fit((cols - self.mean) / self.scale, y, sample_weight=weights)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_proba((x[:, self.columns] - self.mean) / self.scale)

    def as_weights(self) -> LinearModel:
        """The standardisation folded into the coefficients: one number per raw feature."""
        coef = self.model.coef_[0] / self.scale
        intercept = float(self.model.intercept_[0] - (coef * self.mean).sum())
        return LinearModel(intercept=round(intercept, 8), coefficients={n: round(float(c), 8) for n, c in zip(self.names, coef, strict=True)})


@dataclass
class Fitted:
    names: list[str]
    attributable: Any  # _Linear, or sklearn GradientBoostingClassifier
    contradictory: Any | None

    def p_attributable(self, x: np.ndarray) -> np.ndarray:
        return self.attributable.predict_proba(x)[:, 1]

    def p_contradictory(self, x: np.ndarray) -> np.ndarray:
        if self.contradictory is None:
            return np.zeros(len(x))
        return self.contradictory.predict_proba(x)[:, 1]


def _sample_weights(rows: Sequence[Row], positive: np.ndarray) -> np.ndarray:
    """Each set weighs the same, and within a set each class weighs the same: a large set or a
    skewed one does not decide the fit."""
    weights = np.zeros(len(rows))
    sets = sorted({r.dataset for r in rows})
    for name in sets:
        index = np.asarray([r.dataset == name for r in rows])
        for value in (True, False):
            members = index & (positive == value)
            if members.any():
                weights[members] = 1.0 / (2 * members.sum() * len(sets))
    return weights * len(rows)


def _boosted(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier

    model = GradientBoostingClassifier(
        n_estimators=TREES, max_depth=DEPTH, learning_rate=LEARNING_RATE, subsample=0.8, random_state=0
    )
    return model.fit(x, y, sample_weight=weights)


def contradiction_rows(rows: Sequence[Row]) -> np.ndarray:
    """Where P(contradictory) is fitted and its precision measured: three-way NLI pairs, and
    the battery's supported rows as further negatives (its unsupported rows may or may not
    be contradicted: no label)."""
    return np.asarray([r.split == "train" and (r.dataset not in BATTERY_SETS or r.gold == "attributable") for r in rows])


def _attributable(rows: Sequence[Row], x: np.ndarray, names: Sequence[str], linear: LinearChoice | None) -> Any:
    gold = np.asarray([r.gold == "attributable" for r in rows])
    weights = _sample_weights(rows, gold)
    if linear is None:
        return _boosted(x, gold, weights)
    return _Linear(names, linear.features, linear.strength).fit(x, gold, weights)


def fit(rows: Sequence[Row], names: Sequence[str], linear: LinearChoice | None = None) -> Fitted:
    """Both models on ``rows`` (fitting rows only; the caller leaves test rows out):
    P(attributable) linear where ``linear`` says how, else boosted trees."""
    x = matrix(rows, names)
    attributable = _attributable(rows, x, names, linear)
    three_way = contradiction_rows(rows)
    gold_c = np.asarray([r.gold == "contradictory" for r in rows])
    contradictory = None  # no three-way rows with both classes (a fold without them): never contradictory
    if len(set(gold_c[three_way].tolist())) == 2:
        subset = [r for r, t in zip(rows, three_way, strict=True) if t]
        contradictory = _boosted(x[three_way], gold_c[three_way], _sample_weights(subset, gold_c[three_way]))
    return Fitted(list(names), attributable, contradictory)


def mean_balanced_accuracy(rows: Sequence[Row], p: np.ndarray, threshold: float) -> float:
    """Balanced accuracy of attributable vs not, averaged over the sets of ``rows``."""
    scores = []
    for name in sorted({r.dataset for r in rows}):
        index = [i for i, r in enumerate(rows) if r.dataset == name]
        scores.append(balanced_accuracy([rows[i].gold == "attributable" for i in index], [p[i] >= threshold for i in index]))
    return float(np.mean(scores))


def best_mean_threshold(rows: Sequence[Row], p: np.ndarray) -> float:
    """The cut-off of best balanced accuracy averaged over the sets of ``rows``, among
    quantiles of ``p`` (ties: the one nearest 0.5). Not ``calibration.best_threshold``: that
    one scores pooled pairs on a fixed grid."""
    grid = np.unique(np.round(np.quantile(p, np.linspace(0.02, 0.98, 97)), 4))
    return float(max(grid, key=lambda t: (mean_balanced_accuracy(rows, p, t), -abs(t - 0.5))))


def precision_threshold(gold: np.ndarray, p: np.ndarray, target: float = TARGET_PRECISION, min_support: int = 10) -> float:
    """The lowest threshold whose positives reach ``target`` precision (at least
    ``min_support`` of them); 1.0 (never) where none does."""
    order = np.argsort(-p)
    hits = np.cumsum(gold[order])
    counts = np.arange(1, len(p) + 1)
    ok = (hits / counts >= target) & (counts >= min_support)
    if not ok.any():
        return 1.0
    last = int(np.where(ok)[0].max())
    return float(p[order][last])


def most_precise_threshold(gold: np.ndarray, p: np.ndarray, min_recall: float = 0.05) -> tuple[float, float]:
    """Where no threshold reaches the target: the one of highest precision among those that
    keep at least ``min_recall`` of the positives, and that precision."""
    order = np.argsort(-p)
    hits = np.cumsum(gold[order])
    counts = np.arange(1, len(p) + 1)
    enough = hits >= max(1, min_recall * gold.sum())
    if not enough.any():
        return 1.0, 0.0
    precision = np.where(enough, hits / counts, -1.0)
    best = int(np.argmax(precision))
    return float(p[order][best]), float(precision[best])


def out_of_fold(
    rows: Sequence[Row], names: Sequence[str], linear: LinearChoice | None = None, folds: int = 5, seed: int = 13
) -> tuple[np.ndarray, np.ndarray]:
    """P(attributable) and P(contradictory) of every row from a fit that did not see its group."""
    groups = sorted({r.group for r in rows})
    random.Random(seed).shuffle(groups)
    fold_of = {g: i % folds for i, g in enumerate(groups)}
    x = matrix(rows, names)
    p_a, p_c = np.zeros(len(rows)), np.zeros(len(rows))
    for k in range(folds):
        held = np.asarray([fold_of[r.group] == k for r in rows])
        model = fit([r for r, h in zip(rows, held, strict=True) if not h], names, linear)
        p_a[held], p_c[held] = model.p_attributable(x[held]), model.p_contradictory(x[held])
    return p_a, p_c


def thresholds(rows: Sequence[Row], names: Sequence[str], linear: LinearChoice | None = None) -> dict[str, float]:
    """The three cut-offs, on out-of-fold predictions of the fitting rows."""
    p_a, p_c = out_of_fold(rows, names, linear)
    gold_a = np.asarray([r.gold == "attributable" for r in rows])
    three_way = contradiction_rows(rows)
    gold_c = np.asarray([r.gold == "contradictory" for r in rows])
    contradictory = precision_threshold(gold_c[three_way], p_c[three_way])
    chosen = p_c[three_way] >= contradictory
    precision = float(gold_c[three_way][chosen].mean()) if chosen.any() else 0.0
    if contradictory >= 1.0:  # the target is out of reach: the most precise cut-off, its precision reported
        contradictory, precision = most_precise_threshold(gold_c[three_way], p_c[three_way])
    attributable = best_mean_threshold(rows, p_a)
    return {
        "attributable": attributable,
        "contradictory": contradictory,
        "edit": precision_threshold(gold_a, p_a),
        "oof_mean_balanced_accuracy": round(100 * mean_balanced_accuracy(rows, p_a, attributable), 1),
        "oof_contradiction_precision": round(100 * precision, 1),
        "oof_contradiction_recall": round(100 * float((p_c[three_way] >= contradictory)[gold_c[three_way]].mean()), 1),
    }


def _ensemble(model: Any, names: Sequence[str]) -> TreeEnsemble:
    """A fitted scikit-learn ensemble as numbers: its initial raw score and every tree, the
    learning rate folded into the leaf values."""
    trees = []
    for estimator in model.estimators_[:, 0]:
        t = estimator.tree_
        leaf = t.children_left == -1
        trees.append(
            Tree(
                feature=[None if leaf[i] else names[int(t.feature[i])] for i in range(t.node_count)],
                threshold=[0.0 if leaf[i] else float(t.threshold[i]) for i in range(t.node_count)],
                left=[int(v) for v in t.children_left], right=[int(v) for v in t.children_right],
                value=[round(float(t.value[i].ravel()[0]) * model.learning_rate, 8) if leaf[i] else 0.0 for i in range(t.node_count)],
            )  # fmt: skip
        )
    probe = np.zeros((1, len(names)))
    leaves = sum(float(e.predict(probe)[0]) for e in model.estimators_[:, 0]) * model.learning_rate
    return TreeEnsemble(init=round(float(model.decision_function(probe)[0]) - leaves, 8), trees=trees)


def to_weights(model: Fitted, cuts: dict[str, float], fitted_on: str, metrics: dict[str, float]) -> CombinerWeights:
    if model.contradictory is None:
        raise ValueError("no contradictions among the fitting rows: the combiner needs three-way pairs")
    linear = isinstance(model.attributable, _Linear)
    return CombinerWeights(
        features=list(model.names),
        attributable=model.attributable.as_weights() if linear else _ensemble(model.attributable, model.names),
        contradictory=_ensemble(model.contradictory, model.names),
        attributable_threshold=round(cuts["attributable"], 4),
        contradictory_threshold=round(cuts["contradictory"], 4),
        edit_threshold=round(cuts["edit"], 4),
        fitted_on=fitted_on,
        metrics=metrics,
    )


def leave_one_out(
    rows: Sequence[Row], names: Sequence[str], linear: LinearChoice | None = None
) -> dict[str, dict[str, float]]:
    """For each fitting set: fit on the others' fitting rows (threshold on their out-of-fold
    predictions), score the left-out set's held-out rows (the battery's test rows; an NLI
    source's dev pairs), beside the hand cut-offs and word overlap on the same rows."""
    fitting = [r for r in rows if r.split != "test"]
    out: dict[str, dict[str, float]] = {}
    for name in sorted({r.dataset for r in rows}):
        train = [r for r in fitting if r.dataset != name]
        held = [r for r in rows if r.dataset == name and (r.split == "test" or name not in BATTERY_SETS)]
        if not held or not train:
            continue
        model = fit(train, names, linear)
        p_train, _ = out_of_fold(train, names, linear)
        cut = best_mean_threshold(train, p_train)
        p = model.p_attributable(matrix(held, names))
        gold = [r.gold == "attributable" for r in held]
        out[name] = {
            "n": len(held),
            "combiner": round(100 * balanced_accuracy(gold, list(p >= cut)), 1),
            "hand": round(100 * balanced_accuracy(gold, [r.hand == "attributable" for r in held]), 1),
            "overlap": round(100 * balanced_accuracy(gold, [r.features.get("overlap_item", 0.0) >= OVERLAP_CUT for r in held]), 1),
            "threshold": round(cut, 3),
        }
    return out


def _linear_folds(fitting: Sequence[Row], x: np.ndarray, names: Sequence[str], choice: LinearChoice) -> dict[str, tuple[float, float]]:
    """Each set left out in turn: the linear fit's and the hand cut-offs' balanced accuracy
    on its fitting rows (P(attributable) at 0.5: the class-balanced weights put the balance
    point there)."""
    gold = np.asarray([r.gold == "attributable" for r in fitting])
    hand = np.asarray([r.hand == "attributable" for r in fitting])
    folds = {}
    for name in sorted({r.dataset for r in fitting}):
        held = np.asarray([r.dataset == name for r in fitting])
        train = [r for r, h in zip(fitting, held, strict=True) if not h]
        p = _attributable(train, x[~held], names, choice).predict_proba(x[held])[:, 1]
        truth = list(gold[held])
        folds[name] = (100 * balanced_accuracy(truth, list(p >= 0.5)), 100 * balanced_accuracy(truth, list(hand[held])))
    return folds


def select_linear(
    rows: Sequence[Row], names: Sequence[str], families: dict[str, tuple[str, ...]] | None = None
) -> tuple[LinearChoice, list[dict[str, Any]]]:
    """The linear P(attributable)'s family and strength, by leave one dataset out over the
    fitting rows alone (never a test row; ``_linear_folds``). The choice wins the most folds
    against the hand cut-offs, then has the highest mean balanced accuracy on the left-out
    battery sets (third-party LLM text, what the product checks). Returns the choice and
    every candidate's row."""
    fitting = [r for r in rows if r.split != "test"]
    x = matrix(fitting, names)
    families = families or LINEAR_FAMILIES
    choices = [LinearChoice(family, features, strength) for family, features in families.items() for strength in STRENGTHS]
    table: list[dict[str, Any]] = []
    for choice in choices:
        folds = _linear_folds(fitting, x, names, choice)
        battery = [c for name, (c, _) in folds.items() if name in BATTERY_SETS]
        table.append({
            "family": choice.family, "strength": choice.strength, "wins": sum(c > h for c, h in folds.values()),
            "battery_mean": round(float(np.mean(battery)), 1) if battery else 0.0,
            "folds": {name: round(c, 1) for name, (c, _) in folds.items()},
        })  # fmt: skip
    best = max(range(len(table)), key=lambda i: (table[i]["wins"], table[i]["battery_mean"]))
    return choices[best], table
