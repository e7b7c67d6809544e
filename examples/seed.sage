R.<x> = QQ[]
f = x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4
print(f.factor())
print(f.discriminant())
