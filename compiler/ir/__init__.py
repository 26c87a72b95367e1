"""The intermediate representation: dtypes and promotion, abstract values, the SSA form."""
