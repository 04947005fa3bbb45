"""A calculator with the scientific stack: the kind of code a tool server runs."""

import numpy as np
import pandas as pd
import scipy.linalg
import sympy

matrix = np.array([[3.0, 1.0], [1.0, 2.0]])
print("solve", np.linalg.solve(matrix, [9.0, 8.0]).round(6).tolist())
print("det", round(float(scipy.linalg.det(matrix)), 6))
x = sympy.symbols("x")
print("integral", sympy.integrate(x**2, (x, 0, 3)))
table = pd.DataFrame({"x": [1, 2, 3], "y": [2.0, 4.0, 6.0]})
print("sum", table["y"].sum(), "mean", table["x"].mean())
