"""CartPole-v1's constants (gymnasium's classic-control CartPoleEnv): both vectorized
simulators step exactly these equations (Euler integration, auto-reset)."""

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_LIMIT = 12 * 2 * 3.141592653589793 / 360
X_LIMIT = 2.4
MAX_STEPS = 500  # truncation, as CartPole-v1's TimeLimit
RESET_LOW, RESET_HIGH = -0.05, 0.05
