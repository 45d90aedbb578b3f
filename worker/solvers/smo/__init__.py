"""The kernel SVM solver by sequential minimal optimization (``solve.solve_smo``; its docstring has the math).

``solve`` runs it; ``run`` holds the state of one run (trace, stopping, result); ``steps`` the two-variable
step, shrinking and the run loops; ``scans`` the working-set scans and gradient updates; ``cache`` the LRU
cache of kernel rows; ``rows`` the kernel rows from position-ordered copies of the data; ``team`` the row
team of threads; ``state`` the named slots of the scalar state the kernels share.
"""
