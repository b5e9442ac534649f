"""The paper's experiments: the synthetic linear/logistic reproduction and the end-to-end experiment runner."""
