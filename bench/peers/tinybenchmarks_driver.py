"""Driver run by bench/coresets/tinybenchmarks_side_by_side.py with the PEER's own environment, from the
peer's folder (felipemaiapolo/tinyBenchmarks, ``tutorials/``): it imports the authors' ``irt.py`` /
``utils.py`` and runs the steps of their notebooks (``training_irt.ipynb``: binarisation, the
dimension heuristic, the IRT model through their ``py-irt train multidim_2pl`` call, lambda;
``anchor_points.ipynb``: KMeans anchors; ``estimating_performance.ipynb``: p-IRT, gp-IRT) on one
benchmark passed as an .npz. Nothing here is imported by the project.

``python tinybenchmarks_driver.py IN.npz OUT.json WORKDIR``
"""

import json
import os
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics.pairwise import pairwise_distances

sys.path.insert(0, os.getcwd())  # the peer's tutorials/ folder
from irt import create_irt_dataset, estimate_ability_parameters, load_irt_parameters, train_irt_model  # noqa: E402
from utils import item_curve  # noqa: E402

src, out, work = sys.argv[1:4]
z = np.load(src)
Y_train, Y_test, number_item = z["Y_train"], z["Y_test"], int(z["k"])
Ds, epochs, lr, device, random_state = [int(d) for d in z["dims"]], int(z["epochs"]), 0.1, "cpu", 42
os.makedirs(work, exist_ok=True)

# training_irt.ipynb (one scenario = the whole benchmark; balance weights all 1)
cs = np.linspace(0.01, .99, 100)
c = cs[np.argmin([np.mean(np.abs((Y_train > c).mean(axis=1) - Y_train.mean(axis=1))) for c in cs])]
Y_bin_train = (Y_train > c).astype(int)
val_ind = list(range(0, Y_bin_train.shape[0], 5))
train_ind = [i for i in range(Y_bin_train.shape[0]) if i not in val_ind]
create_irt_dataset(Y_bin_train[train_ind], f"{work}/irt_val_dataset.jsonlines")
errors = []
for D in Ds:
    train_irt_model(f"{work}/irt_val_dataset.jsonlines", f"{work}/irt_val_model_{D}/", D, lr, epochs, device)
    A, B, Theta = load_irt_parameters(f"{work}/irt_val_model_{D}/")
    seen_items = list(range(0, Y_bin_train.shape[1], 2))
    unseen_items = list(range(1, Y_bin_train.shape[1], 2))
    thetas = [estimate_ability_parameters(Y_bin_train[val_ind][j][seen_items], A[:, :, seen_items], B[:, :, seen_items])
              for j in range(len(val_ind))]
    errors.append(float(np.mean([abs(item_curve(thetas[j], A, B)[0, unseen_items].mean()
                                     - Y_train[val_ind][j, unseen_items].mean()) for j in range(len(val_ind))])))
ind_D = int(np.argmin(np.array(errors)))
D = Ds[ind_D]
create_irt_dataset(Y_bin_train, f"{work}/irt_dataset.jsonlines")
train_irt_model(f"{work}/irt_dataset.jsonlines", f"{work}/irt_model/", D, lr, epochs, device)
v = np.var(Y_train, axis=1).mean()
b = errors[ind_D]
lambd = (b ** 2) / (v / (4 * number_item) + (b ** 2))

# anchor_points.ipynb (clustering = 'irt')
A, B, _ = load_irt_parameters(f"{work}/irt_model/")
X = np.vstack((A.squeeze(), B.squeeze().reshape((1, -1)))).T
norm_balance_weights = np.ones(Y_train.shape[1]) / Y_train.shape[1]
kmeans = KMeans(n_clusters=number_item, n_init="auto", random_state=random_state)
kmeans.fit(X, sample_weight=norm_balance_weights)
anchor_points = pairwise_distances(kmeans.cluster_centers_, X, metric="euclidean").argmin(axis=1)
anchor_weights = np.array([np.sum(norm_balance_weights[kmeans.labels_ == c]) for c in range(number_item)])

# estimating_performance.ipynb
Y_anchor = Y_test[:, anchor_points]
preds = (Y_anchor * anchor_weights).sum(axis=1)
seen_items = list(anchor_points)
unseen_items = [i for i in range(Y_train.shape[1]) if i not in seen_items]
thetas = [estimate_ability_parameters(Y_test[j][seen_items], A[:, :, seen_items], B[:, :, seen_items])
          for j in range(Y_test.shape[0])]
pirt_lambd = Y_anchor.shape[1] / Y_train.shape[1]
pirt = np.array([pirt_lambd * Y_test[j, seen_items].mean() + (1 - pirt_lambd) * item_curve(thetas[j], A, B)[0, unseen_items].mean()
                 for j in range(Y_test.shape[0])])
gpirt = lambd * preds + (1 - lambd) * pirt
json.dump({"threshold": float(c), "dim_errors": dict(zip(map(str, Ds), errors)), "dim": D, "lambda": float(lambd),
           "bias": float(b), "anchors": [int(a) for a in anchor_points], "weights": anchor_weights.tolist(),
           "A": A[0].T.tolist(), "B": B[0, 0].tolist(), "anchor": preds.tolist(), "p_irt": pirt.tolist(),
           "gp_irt": gpirt.tolist()}, open(out, "w"))
