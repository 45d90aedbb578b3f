"""The kernel SVM solver by sampled cutting planes (``solve.solve_sampled_cuts``; its docstring has the math).

``solve`` runs it; ``cuts`` holds the working set of cuts; ``sampling`` draws the sampled cuts; ``master``
solves the master problem on the cuts by an active-set method; ``kernels`` the numba kernels (kernel values
between the sample and the cut's rows, draws).
"""
