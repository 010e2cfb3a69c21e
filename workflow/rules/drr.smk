# Stage family DRR (distil -> train discriminator -> infer); rules arrive with issue 4.
